// Command checkout is an example checkout service that pays its orders
// through the payments service with the Go client, and keeps each payment
// intent's idempotency key in its own order row, written before the first
// try. See README.md.
package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acme/paymentsvc/client"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log); err != nil {
		log.Error("checkout failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger) error {
	pool, err := pgxpool.New(ctx, env("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/checkout_example?sslmode=disable"))
	if err != nil {
		return err
	}
	defer pool.Close()
	payments, err := client.New(client.Config{
		URLs:    strings.Split(env("PAYMENTS_URL", "http://127.0.0.1:8080"), ","),
		APIKey:  os.Getenv("PAYMENTS_API_KEY"),
		Timeout: 20 * time.Second, // a customer waits this long at most; then "processing"
		Logger:  log,
	})
	if err != nil {
		return err
	}
	c := &Checkout{DB: pool, Payments: payments}
	if err := c.Migrate(ctx); err != nil {
		return err
	}
	// Whatever the last run left in flight is finished first, with its keys,
	// and then from time to time: a payment still not final when its
	// customer stopped waiting is finished without waiting for a click.
	resume := func() {
		if n, err := c.ResumePending(ctx); err != nil && ctx.Err() == nil {
			log.Warn("some payments are still not final", "resumed", n, "err", err)
		}
	}
	resume()
	go func() {
		tick := time.NewTicker(time.Minute)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				resume()
			}
		}
	}()
	ln, err := net.Listen("tcp", env("CHECKOUT_ADDR", "127.0.0.1:8090"))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second}
	log.Info("listening", "addr", ln.Addr().String())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// A payment cut short here is not lost: its key is in its order row,
	// and the next start resumes it.
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
