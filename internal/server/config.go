// Package server is paymentsvc's wiring: its configuration, and Serve, which
// builds the service (the database, provider and payments service through
// internal/app, the one wiring path it shares with the reconciler), the HTTP
// API, webhooks and the outbox relay, and runs them until a signal asks it to
// drain and stop. cmd/paymentsvc only parses arguments.
package server

import (
	"strings"
	"time"

	"github.com/acme/paymentsvc/internal/delivery"
	"github.com/acme/paymentsvc/internal/envflag"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/operators"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/settings"
	"github.com/acme/paymentsvc/internal/tenants"
)

// Config is paymentsvc's configuration (docs/configuration.md).
type Config struct {
	settings.Shared
	HTTPAddr       string
	WebhookSecrets []string
	// ProviderWebhookSecrets are each provider's accepted secrets:
	// WEBHOOK_SECRETS_<NAME> if set, else WebhookSecrets.
	ProviderWebhookSecrets map[string][]string
	NATSURL                string
	StreamReplicas         int
	OutboxRelay            bool
	AutoMigrate            bool
	ShutdownTimeout        time.Duration
	// ShutdownDrainDelay is how long, on SIGTERM, readiness answers 503
	// while the listener still serves, before the drain (0: none).
	ShutdownDrainDelay time.Duration
	Failpoint          string
	// TenantRateLimit is the requests per second per tenant and pod of the
	// tenant API (0: off); TenantRateBurst its bucket size (0: the default,
	// ratelimit.DefaultBurst).
	TenantRateLimit float64
	TenantRateBurst int
	// AuthCacheTTL is how long a pod keeps an API key's tenant (0: it asks
	// the database on every request).
	AuthCacheTTL time.Duration
	// ReplayCacheBytes bounds the pod's cache of completed keys' final
	// answers (0: off).
	ReplayCacheBytes int
	// PprofAddr serves net/http/pprof on its own listener ("": off).
	PprofAddr string
	// MetricsAddr serves GET /metrics on its own listener, and then the
	// API's does not ("": on the API's listener).
	MetricsAddr string
	// MerchantWebhooks runs the delivery of the merchant webhooks in this
	// pod (MERCHANT_WEBHOOKS); the endpoints API works either way.
	MerchantWebhooks bool
	// MerchantWebhook configures the deliverer (MERCHANT_WEBHOOK_*).
	MerchantWebhook delivery.Config
	scheduleErr     error // MERCHANT_WEBHOOK_RETRY_SCHEDULE unreadable
	// ConsoleAddr serves the operator console on its own listener
	// (ConsoleOff: none); ConsoleSecureCookie marks its cookie Secure;
	// ConsoleSessionTTL is a session's idle timeout.
	ConsoleAddr         string
	ConsoleSecureCookie bool
	ConsoleSessionTTL   time.Duration
}

// Flags registers every setting on s and returns a function that yields the
// parsed Config.
func Flags(s *envflag.Set) func() Config {
	shared := settings.Register(s, "PostgreSQL URL; the database is created if missing")
	addr := s.String("HTTP_ADDR", "127.0.0.1:8080", "listen address")
	secrets := s.Secret("WEBHOOK_SECRETS", "whsec_dev", "comma-separated accepted webhook signing secrets (of every provider without WEBHOOK_SECRETS_<NAME>)")
	natsURL := s.URL("NATS_URL", "nats://127.0.0.1:4222", "NATS JetStream server(s) for the outbox relay, comma-separated")
	replicas := s.Int("OUTBOX_STREAM_REPLICAS", outbox.DefaultStreamReplicas, "replicas (1-5) of the PAYMENTS stream when the relay creates it; an existing stream is left as it is")
	relay := s.Bool("OUTBOX_RELAY", true, "on: publish outbox events to JetStream; off: leave them in the table")
	migrate := s.Bool("AUTO_MIGRATE", true, "run migrations at startup")
	shutdown := s.Duration("SHUTDOWN_TIMEOUT", 15*time.Second, "how long in-flight requests get to finish on SIGTERM, after the drain delay; then they are cut off")
	drainDelay := s.Duration("SHUTDOWN_DRAIN_DELAY", 5*time.Second, "on SIGTERM, how long /readyz answers 503 while the listener still serves, before draining; 0s: none")
	fp := s.String("PAYMENTSVC_FAILPOINT", "", "testing only: die at this failpoint")
	rateLimit := s.Float("TENANT_RATE_LIMIT", 0, "requests per second per tenant and pod on /v1/payments…, /v1/refunds… (and the rest of the tenant API); over it, 429 rate_limited; 0: off")
	rateBurst := s.Int("TENANT_RATE_BURST", 0, "bucket size of TENANT_RATE_LIMIT (a tenant's bucket starts full); 0: max(1, ⌈2 × TENANT_RATE_LIMIT⌉)")
	authTTL := s.Duration("AUTH_CACHE_TTL", tenants.DefaultCacheTTL, "how long a pod keeps an API key's tenant in memory (unknown keys: at most 2s): a revoked key keeps working for up to this long; 0s: ask the database on every request")
	replayBytes := s.Int("REPLAY_CACHE_BYTES", idempotency.DefaultReplayCacheBytes, "bytes of completed keys' final answers a pod keeps in memory, so that a replay of a create is answered without the database (never past the key's expiry); 0: off")
	pprofAddr := s.String("PPROF_ADDR", "", "serve net/http/pprof (profiles) on this address, a listener of its own; keep it private; empty: off")
	metricsAddr := s.String("METRICS_ADDR", "", "serve GET /metrics on this address only, a listener of its own, and no longer on HTTP_ADDR; empty: /metrics on HTTP_ADDR")
	webhooks := s.Bool("MERCHANT_WEBHOOKS", true, "on: this pod delivers the merchant webhooks (events to the tenants' endpoints); off: it makes no delivery attempts (the endpoints API works all the same)")
	whTimeout := s.Duration("MERCHANT_WEBHOOK_TIMEOUT", delivery.DefaultTimeout, "one delivery attempt: connect, TLS, request and the answer's status; a 2xx within it delivers")
	whSchedule := s.String("MERCHANT_WEBHOOK_RETRY_SCHEDULE", delivery.FormatSchedule(delivery.DefaultSchedule), "comma-separated waits before each retry of a delivery without a 2xx; after the last, it is failed")
	whPrivate := s.Bool("MERCHANT_WEBHOOK_ALLOW_PRIVATE", false, "development and tests only: let deliveries connect to loopback, private and other non-public addresses")
	whHTTP := s.Bool("MERCHANT_WEBHOOK_ALLOW_HTTP", false, "development and tests only: accept http:// endpoint URLs (else https:// only)")
	whConc := s.Int("MERCHANT_WEBHOOK_CONCURRENCY", delivery.DefaultConcurrency, "deliveries a pod holds at once (claimed, queued for their endpoint, or in flight)")
	whEndpointConc := s.Int("MERCHANT_WEBHOOK_ENDPOINT_CONCURRENCY", delivery.DefaultEndpointConcurrency, "delivery attempts in flight to one endpoint from one pod")
	consoleAddr := s.String("CONSOLE_ADDR", "127.0.0.1:8081", "serve the operator console (/console/) on this address, a listener of its own, never the API's; off: none")
	consoleSecure := s.Bool("CONSOLE_SECURE_COOKIE", false, "mark the console's session cookie Secure (on wherever the console is reached over HTTPS)")
	consoleTTL := s.Duration("CONSOLE_SESSION_TTL", operators.DefaultIdleTimeout, "a console session ends after this long unused (and 24h after sign-in in any case)")
	return func() Config {
		c := Config{
			Shared: shared(), HTTPAddr: *addr, WebhookSecrets: splitSecrets(*secrets),
			NATSURL: *natsURL, StreamReplicas: *replicas, OutboxRelay: *relay, AutoMigrate: *migrate,
			ShutdownTimeout: *shutdown, ShutdownDrainDelay: *drainDelay, Failpoint: *fp,
			ProviderWebhookSecrets: map[string][]string{},
			TenantRateLimit:        *rateLimit, TenantRateBurst: *rateBurst,
			AuthCacheTTL: *authTTL, ReplayCacheBytes: *replayBytes, PprofAddr: *pprofAddr, MetricsAddr: *metricsAddr,
			ConsoleAddr: *consoleAddr, ConsoleSecureCookie: *consoleSecure, ConsoleSessionTTL: *consoleTTL,
		}
		c.MerchantWebhooks = *webhooks
		c.MerchantWebhook = delivery.Config{
			Timeout: *whTimeout, AllowPrivate: *whPrivate, AllowHTTP: *whHTTP,
			Concurrency: *whConc, EndpointConcurrency: *whEndpointConc,
		}
		c.MerchantWebhook.Schedule, c.scheduleErr = delivery.ParseSchedule(*whSchedule)
		for _, p := range c.Providers {
			c.ProviderWebhookSecrets[p.Name] = c.WebhookSecrets
			if own, ok := s.Lookup(settings.ProviderVar("WEBHOOK_SECRETS", p.Name)); ok {
				c.ProviderWebhookSecrets[p.Name] = splitSecrets(own)
			}
		}
		return c
	}
}

func splitSecrets(raw string) []string {
	var out []string
	for _, s := range strings.Split(raw, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
