// Package server is paymentsvc's wiring: its configuration, and Serve, which
// builds the service (the database, provider and payments service through
// internal/app, the one wiring path it shares with the reconciler), the HTTP
// API, webhooks and the outbox relay, and runs them until a signal asks it to
// drain and stop. cmd/paymentsvc only parses arguments.
package server

import (
	"strings"
	"time"

	"github.com/acme/paymentsvc/internal/envflag"
	"github.com/acme/paymentsvc/internal/settings"
)

// Config is paymentsvc's configuration (docs/configuration.md).
type Config struct {
	settings.Shared
	HTTPAddr        string
	WebhookSecrets  []string
	NATSURL         string
	OutboxRelay     bool
	AutoMigrate     bool
	ShutdownTimeout time.Duration
	// ShutdownDrainDelay is how long, on SIGTERM, readiness answers 503
	// while the listener still serves, before the drain (0: none).
	ShutdownDrainDelay time.Duration
	Failpoint          string
	// TenantRateLimit is the requests per second per tenant and pod of the
	// tenant API (0: off); TenantRateBurst its bucket size (0: the default,
	// ratelimit.DefaultBurst).
	TenantRateLimit float64
	TenantRateBurst int
}

// Flags registers every setting on s and returns a function that yields the
// parsed Config.
func Flags(s *envflag.Set) func() Config {
	shared := settings.Register(s, "PostgreSQL URL; the database is created if missing")
	addr := s.String("HTTP_ADDR", "127.0.0.1:8080", "listen address")
	secrets := s.Secret("WEBHOOK_SECRETS", "whsec_dev", "comma-separated accepted webhook signing secrets")
	natsURL := s.URL("NATS_URL", "nats://127.0.0.1:4222", "NATS JetStream server(s) for the outbox relay, comma-separated")
	relay := s.Bool("OUTBOX_RELAY", true, "on: publish outbox events to JetStream; off: leave them in the table")
	migrate := s.Bool("AUTO_MIGRATE", true, "run migrations at startup")
	shutdown := s.Duration("SHUTDOWN_TIMEOUT", 15*time.Second, "how long in-flight requests get to finish on SIGTERM, after the drain delay; then they are cut off")
	drainDelay := s.Duration("SHUTDOWN_DRAIN_DELAY", 5*time.Second, "on SIGTERM, how long /readyz answers 503 while the listener still serves, before draining; 0s: none")
	fp := s.String("PAYMENTSVC_FAILPOINT", "", "testing only: die at this failpoint")
	rateLimit := s.Float("TENANT_RATE_LIMIT", 0, "requests per second per tenant and pod on /v1/payments…, /v1/refunds… (and the rest of the tenant API); over it, 429 rate_limited; 0: off")
	rateBurst := s.Int("TENANT_RATE_BURST", 0, "bucket size of TENANT_RATE_LIMIT (a tenant's bucket starts full); 0: max(1, ⌈2 × TENANT_RATE_LIMIT⌉)")
	return func() Config {
		return Config{
			Shared: shared(), HTTPAddr: *addr, WebhookSecrets: splitSecrets(*secrets),
			NATSURL: *natsURL, OutboxRelay: *relay, AutoMigrate: *migrate,
			ShutdownTimeout: *shutdown, ShutdownDrainDelay: *drainDelay, Failpoint: *fp,
			TenantRateLimit: *rateLimit, TenantRateBurst: *rateBurst,
		}
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
