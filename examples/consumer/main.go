// Command consumer is an example downstream service: it consumes the
// payments service's PaymentSucceeded events from JetStream with a durable
// pull consumer and applies each one exactly once with the inbox pattern.
// See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// config is read from the environment; see README.md.
type config struct {
	NATSURL     string
	DatabaseURL string
	Stream      string
	Subject     string
	Durable     string
}

func configFromEnv() config {
	return config{
		NATSURL:     env("NATS_URL", "nats://127.0.0.1:4222"),
		DatabaseURL: env("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/consumer_example?sslmode=disable"),
		Stream:      env("STREAM", "PAYMENTS"),
		Subject:     env("SUBJECT", "payments.succeeded"),
		Durable:     env("DURABLE", "fulfilment"),
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopTracing, err := setupTracing(ctx, log)
	if err != nil {
		log.Error("tracing", "err", err)
		os.Exit(1)
	}
	err = run(ctx, configFromEnv(), log)
	stopTracing()
	if err != nil {
		log.Error("consumer failed", "err", err)
		os.Exit(1)
	}
}

// run consumes until ctx ends.
func run(ctx context.Context, cfg config, log *slog.Logger) error {
	if err := ensureDatabase(ctx, cfg.DatabaseURL); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	inbox := &Inbox{pool: pool}
	if err := inbox.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}

	nc, err := nats.Connect(cfg.NATSURL, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cons, err := durableConsumer(ctx, js, cfg, log)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while waiting for the stream
		}
		return err
	}
	log.Info("consuming", "stream", cfg.Stream, "subject", cfg.Subject, "durable", cfg.Durable)
	return consume(ctx, cons, inbox, log)
}

// durableConsumer creates (or finds) the durable pull consumer. The stream
// belongs to the payments service, so this waits for it to exist rather
// than creating it.
func durableConsumer(ctx context.Context, js jetstream.JetStream, cfg config, log *slog.Logger) (jetstream.Consumer, error) {
	for {
		cons, err := js.CreateOrUpdateConsumer(ctx, cfg.Stream, jetstream.ConsumerConfig{
			Durable:       cfg.Durable,
			FilterSubject: cfg.Subject,
			DeliverPolicy: jetstream.DeliverAllPolicy,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       30 * time.Second, // unacked (crashed) deliveries come back after this
			MaxDeliver:    -1,
		})
		if err == nil {
			return cons, nil
		}
		log.Warn("waiting for the stream", "stream", cfg.Stream, "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// consume handles messages one at a time until ctx ends.
func consume(ctx context.Context, cons jetstream.Consumer, inbox *Inbox, log *slog.Logger) error {
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer it.Stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			log.Warn("next message", "err", err) // e.g. missed heartbeats while NATS restarts
			continue
		}
		applied, err := inbox.Handle(ctx, msg)
		if err != nil {
			log.Error("handle event", "subject", msg.Subject(), "err", err)
			continue
		}
		log.Info("event handled", "id", msg.Headers().Get(jetstream.MsgIDHeader), "applied", applied)
	}
}

// ensureDatabase creates the database of databaseURL if it does not exist,
// so that the example runs against a bare PostgreSQL.
func ensureDatabase(ctx context.Context, databaseURL string) error {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	var pgErr *pgconn.PgError
	if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name
		if conn != nil {
			_ = conn.Close(ctx)
		}
		return err
	}
	admin := cfg.Copy()
	admin.Database = "postgres"
	conn, err = pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{cfg.Database}.Sanitize())
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // created meanwhile
		return nil
	}
	return err
}
