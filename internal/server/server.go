package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	apispec "github.com/acme/paymentsvc/api"
	"github.com/acme/paymentsvc/internal/api"
	"github.com/acme/paymentsvc/internal/app"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/delivery"
	"github.com/acme/paymentsvc/internal/failpoint"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/metrics"
	"github.com/acme/paymentsvc/internal/operators"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/ratelimit"
	"github.com/acme/paymentsvc/internal/settings"
	"github.com/acme/paymentsvc/internal/tenants"
	"github.com/acme/paymentsvc/internal/tracing"
	"github.com/acme/paymentsvc/internal/webhook"
)

// Validate refuses configurations the service cannot run safely with.
func (c Config) Validate() error {
	if err := c.Shared.Validate(); err != nil {
		return err
	}
	for name, secrets := range c.ProviderWebhookSecrets {
		if len(secrets) == 0 {
			return fmt.Errorf("%s (or WEBHOOK_SECRETS) must name at least one secret", settings.ProviderVar("WEBHOOK_SECRETS", name))
		}
	}
	if len(c.WebhookSecrets) == 0 {
		return errors.New("WEBHOOK_SECRETS must name at least one secret")
	}
	if c.StreamReplicas < 1 || c.StreamReplicas > outbox.MaxStreamReplicas {
		return fmt.Errorf("OUTBOX_STREAM_REPLICAS must be between 1 and %d, not %d", outbox.MaxStreamReplicas, c.StreamReplicas)
	}
	if c.ShutdownTimeout < 0 || c.ShutdownDrainDelay < 0 {
		return fmt.Errorf("SHUTDOWN_TIMEOUT (%s) and SHUTDOWN_DRAIN_DELAY (%s) must not be negative", c.ShutdownTimeout, c.ShutdownDrainDelay)
	}
	if !(c.TenantRateLimit >= 0) || math.IsInf(c.TenantRateLimit, 0) || c.TenantRateBurst < 0 {
		return fmt.Errorf("TENANT_RATE_LIMIT (%v) must be a number of at least 0 and TENANT_RATE_BURST (%d) not negative", c.TenantRateLimit, c.TenantRateBurst)
	}
	if err := ratelimit.CheckLimit(c.TenantRateLimit, c.TenantRateBurst); err != nil {
		return fmt.Errorf("TENANT_RATE_LIMIT and TENANT_RATE_BURST: %w", err)
	}
	if c.ReplayCacheBytes < 0 {
		return fmt.Errorf("REPLAY_CACHE_BYTES (%d) must not be negative", c.ReplayCacheBytes)
	}
	if c.AuthCacheTTL < 0 {
		return fmt.Errorf("AUTH_CACHE_TTL (%s) must not be negative", c.AuthCacheTTL)
	}
	if c.scheduleErr != nil {
		return fmt.Errorf("MERCHANT_WEBHOOK_RETRY_SCHEDULE: %w", c.scheduleErr)
	}
	if c.MerchantWebhook.Timeout <= 0 {
		return fmt.Errorf("MERCHANT_WEBHOOK_TIMEOUT (%s) must be positive", c.MerchantWebhook.Timeout)
	}
	if err := c.MerchantWebhook.Validate(); err != nil {
		return fmt.Errorf("MERCHANT_WEBHOOK_CONCURRENCY and MERCHANT_WEBHOOK_ENDPOINT_CONCURRENCY: %w", err)
	}
	if c.ConsoleAddr == "" {
		return errors.New("CONSOLE_ADDR is empty: name an address, or off for no console")
	}
	if c.ConsoleSessionTTL <= 0 || c.ConsoleSessionTTL > operators.Lifetime {
		return fmt.Errorf("CONSOLE_SESSION_TTL (%s) must be positive and at most %s (a session's absolute lifetime)", c.ConsoleSessionTTL, operators.Lifetime)
	}
	if c.OutboxRelay && c.NATSURL == "" {
		// Refused rather than left to the relay's default server.
		return errors.New("NATS_URL is empty while OUTBOX_RELAY is on")
	}
	return nil
}

// ServiceName is the service.name of paymentsvc's traces unless
// OTEL_SERVICE_NAME says otherwise.
const ServiceName = "paymentsvc"

// Serve runs the service until ctx is cancelled (SIGINT/SIGTERM), then
// drains (see drain): readiness turns 503 while the listener still serves
// for ShutdownDrainDelay, then the listener closes and in-flight requests
// get ShutdownTimeout to finish; then the relay stops.
func Serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	failpoint.Arm(cfg.Failpoint)
	// Before anything is wired: the handler, the pool and the provider
	// client are instrumented only if tracing is on when they are built.
	stopTracing, err := tracing.Setup(ctx, ServiceName, log)
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	defer stopTracing() // after the drain and the relay: flushes their spans
	log = tracing.Logger(log)
	a, err := app.Open(ctx, cfg.Shared, app.Options{CreateDatabase: true, Migrate: cfg.AutoMigrate}, log)
	if err != nil {
		return err
	}
	defer a.Close()
	pool := a.Pool
	a.Payments.UseReplayCache(idempotency.NewReplayCache(int64(cfg.ReplayCacheBytes)))
	// The create path's commits send no NOTIFY: they wake this pod's relay
	// (or, without one, a debounced NOTIFY reaches the others').
	wakeup := outbox.NewWakeup()
	a.Payments.UseOutboxWakeup(wakeup)
	defer metrics.RegisterBacklog(a.Backlog, log)()
	defer metrics.RegisterPool(pool.ConnectionStats)()
	draining := new(atomic.Bool)
	syncRefund := func(ctx context.Context, id string) error {
		_, _, err := a.Payments.SyncRefund(ctx, id, payments.SyncOptions{Source: lifecycle.SourceWebhook})
		return err
	}
	webhooks := webhook.Providers{}
	for _, p := range cfg.Providers {
		h := webhook.NewHandler(pool, p.Name, cfg.ProviderWebhookSecrets[p.Name], log)
		h.SyncRefund = syncRefund
		h.Type = p.Type
		h.KeyTTL = cfg.KeyTTL
		webhooks[p.Name] = h
	}
	handler := api.New(api.Deps{
		Pool: pool, Payments: a.Payments, Webhooks: webhooks,
		Endpoints: delivery.NewEndpoints(pool, delivery.EndpointsConfig{
			AllowHTTP: cfg.MerchantWebhook.AllowHTTP, Keys: idempotency.Config{LockTTL: cfg.LockTTL, KeyTTL: cfg.KeyTTL},
		}),
		OpenAPI: apispec.OpenAPI, Draining: draining, Log: log, MetricsElsewhere: cfg.MetricsAddr != "",
		RateLimit: ratelimit.New(ratelimit.Config{Limit: cfg.TenantRateLimit, Burst: cfg.TenantRateBurst}),
		Auth:      tenants.NewCache(pool, authCacheConfig(cfg.AuthCacheTTL)),
	})
	if cfg.PprofAddr != "" {
		stop, err := servePprof(cfg.PprofAddr, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	if cfg.MetricsAddr != "" {
		stop, err := serveMetrics(cfg.MetricsAddr, log)
		if err != nil {
			return err
		}
		defer stop()
	}

	stopConsole, err := serveConsole(cfg, a, log)
	if err != nil {
		return err
	}
	defer func() { stopConsole(cfg.ShutdownTimeout) }()

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.HTTPAddr, err)
	}
	srv, conns := newHTTPServer(handler)

	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	var wg sync.WaitGroup
	if cfg.OutboxRelay {
		relay, err := outbox.NewRelay(pool, outbox.Config{
			NATSURL: cfg.NATSURL, StreamReplicas: cfg.StreamReplicas, Logger: log, Fanout: delivery.NewFanout(log),
			Wakeup: wakeup,
		})
		if err != nil {
			return err
		}
		wg.Go(func() {
			if err := relay.Run(bg); err != nil && !errors.Is(err, context.Canceled) {
				log.Error("outbox relay stopped", "err", err)
			}
		})
	} else {
		wg.Go(func() { outbox.Notify(bg, pool, wakeup, outbox.DefaultNotifyInterval, log) })
	}
	wg.Go(func() { delivery.RefreshGauges(bg, pool, 10*time.Second, log) })
	if cfg.MerchantWebhooks {
		whCfg := cfg.MerchantWebhook
		whCfg.Logger = log
		deliverer, err := delivery.NewDeliverer(pool, whCfg)
		if err != nil {
			return err
		}
		wg.Go(func() {
			if err := deliverer.Run(bg); err != nil {
				log.Error("merchant webhooks stopped", "err", err)
			}
		})
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "database", db.Redact(cfg.DatabaseURL), "outbox_relay", cfg.OutboxRelay,
		"merchant_webhooks", cfg.MerchantWebhooks,
		"tenant_rate_limit", cfg.TenantRateLimit, "tracing", tracing.Enabled())

	select {
	case err := <-serveErr:
		stopBG()
		wg.Wait()
		return err
	case <-ctx.Done():
	}
	err = drain(srv, conns, serveErr, cfg, draining, log)
	stopBG()
	wg.Wait()
	if err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}
