package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	apispec "github.com/acme/paymentsvc/api"
	"github.com/acme/paymentsvc/internal/api"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/failpoint"
	"github.com/acme/paymentsvc/internal/metrics"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/webhook"
)

// Validate refuses configurations the service cannot run safely with.
func (c Config) Validate() error {
	if err := c.Shared.Validate(); err != nil {
		return err
	}
	if len(c.WebhookSecrets) == 0 {
		return errors.New("WEBHOOK_SECRETS must name at least one secret")
	}
	if c.StreamReplicas < 1 || c.StreamReplicas > outbox.MaxStreamReplicas {
		return fmt.Errorf("OUTBOX_STREAM_REPLICAS must be between 1 and %d, not %d", outbox.MaxStreamReplicas, c.StreamReplicas)
	}
	return nil
}

// OpenDB creates the database if missing, connects, and migrates unless
// migrate is false.
func OpenDB(ctx context.Context, databaseURL string, migrate bool, log *slog.Logger) (*pgxpool.Pool, error) {
	if err := db.EnsureDatabase(ctx, databaseURL); err != nil {
		return nil, err
	}
	pool, err := db.Open(ctx, databaseURL)
	if err != nil {
		return nil, err
	}
	if migrate {
		if err := db.Migrate(ctx, pool, log); err != nil {
			pool.Close()
			return nil, err
		}
	}
	return pool, nil
}

// Serve runs the service until ctx is cancelled (SIGINT/SIGTERM), then
// drains: readiness turns 503, the listener closes, in-flight requests
// (their provider calls and completing transactions included) finish within
// ShutdownTimeout, and the relay stops.
func Serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	failpoint.Arm(cfg.Failpoint)
	pool, err := OpenDB(ctx, cfg.DatabaseURL, cfg.AutoMigrate, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	defer metrics.RegisterBacklog(pool, log)()

	// Enough idle connections that concurrent payments reuse them instead of
	// opening one per call; every call has its own timeout in the wrapper.
	providerHTTP := &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment, MaxIdleConns: 256, MaxIdleConnsPerHost: 64,
		IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 5 * time.Second,
	}}
	prov := provider.NewResilient(provider.NewSim(cfg.ProviderURL, cfg.ProviderAPIKey, providerHTTP), cfg.Provider(), log)
	svc, err := payments.NewService(pool, prov, cfg.Payments(), log)
	if err != nil {
		return err
	}
	draining := new(atomic.Bool)
	handler := api.New(api.Deps{
		Pool: pool, Payments: svc, Webhooks: webhook.NewHandler(pool, cfg.WebhookSecrets, log),
		OpenAPI: apispec.OpenAPI, Draining: draining, Log: log,
	})

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.HTTPAddr, err)
	}
	// No WriteTimeout: a create may legitimately take the whole retry budget.
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}

	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	var wg sync.WaitGroup
	if cfg.OutboxRelay {
		relay, err := outbox.NewRelay(pool, outbox.Config{NATSURL: cfg.NATSURL, StreamReplicas: cfg.StreamReplicas, Logger: log})
		if err != nil {
			return err
		}
		wg.Go(func() {
			if err := relay.Run(bg); err != nil && !errors.Is(err, context.Canceled) {
				log.Error("outbox relay stopped", "err", err)
			}
		})
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "database", db.Redact(cfg.DatabaseURL), "outbox_relay", cfg.OutboxRelay)

	select {
	case err := <-serveErr:
		stopBG()
		wg.Wait()
		return err
	case <-ctx.Done():
	}
	// Not ready from before the line is logged, so whoever sees the line
	// never gets a 200 from /readyz again.
	draining.Store(true)
	log.Info("shutting down: draining in-flight requests", "timeout", cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	err = srv.Shutdown(sctx)
	if err2 := <-serveErr; !errors.Is(err2, http.ErrServerClosed) && err == nil {
		err = err2
	}
	stopBG()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}
