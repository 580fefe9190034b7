// Command receiver is an example merchant endpoint for the payments
// service's webhooks: it verifies each delivery with the official Standard
// Webhooks library and applies each event once, deduplicated by webhook-id.
// See README.md.
package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// config is read from the environment; see README.md.
type config struct {
	Addr    string
	Secrets []string
}

func configFromEnv() config {
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = "127.0.0.1:8090"
	}
	var secrets []string
	for _, s := range strings.Split(os.Getenv("WEBHOOK_SECRETS"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			secrets = append(secrets, s)
		}
	}
	return config{Addr: addr, Secrets: secrets}
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, configFromEnv(), logEvent(log), log); err != nil {
		log.Error("receiver failed", "err", err)
		os.Exit(1)
	}
}

// logEvent is the example's effect of an event: a log line. A shop would
// fulfil the order of a payment.succeeded here, and so on.
func logEvent(log *slog.Logger) func(context.Context, Event) error {
	return func(_ context.Context, ev Event) error {
		log.Info("event", "id", ev.ID, "type", ev.Type, "created_at", ev.CreatedAt, "data", string(ev.Data))
		return nil
	}
}

// run serves the receiver at cfg.Addr (any path) until ctx ends.
func run(ctx context.Context, cfg config, apply func(context.Context, Event) error, log *slog.Logger) error {
	rc, err := NewReceiver(cfg.Secrets, &Seen{TTL: 48 * time.Hour}, apply, log)
	if err != nil {
		return errors.New("WEBHOOK_SECRETS must name the endpoint's secret (whsec_…), two while rotating: " + err.Error())
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: rc, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("receiving webhooks", "addr", ln.Addr().String(), "secrets", len(cfg.Secrets))
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
