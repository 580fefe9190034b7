// Package server wires paymentsvc together: configuration, database,
// provider, HTTP API, webhooks and the outbox relay, and runs them until a
// signal asks it to drain and stop. cmd/paymentsvc only parses arguments.
package server

import (
	"strings"
	"time"

	"github.com/acme/paymentsvc/internal/envflag"
	"github.com/acme/paymentsvc/internal/payments"
)

// Config is paymentsvc's configuration (CONTRACT §2).
type Config struct {
	DatabaseURL     string
	HTTPAddr        string
	ProviderURL     string
	ProviderAPIKey  string
	WebhookSecrets  []string
	LockTTL         time.Duration
	KeyTTL          time.Duration
	CallTimeout     time.Duration
	RetryBudget     time.Duration
	BreakerFailures int
	BreakerCooldown time.Duration
	NATSURL         string
	OutboxRelay     bool
	AutoMigrate     bool
	ShutdownTimeout time.Duration
	Failpoint       string
}

// Flags registers every setting on s and returns a function that yields the
// parsed Config.
func Flags(s *envflag.Set) func() Config {
	dbURL := s.Secret("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/payments?sslmode=disable", "PostgreSQL URL; the database is created if missing")
	addr := s.String("HTTP_ADDR", "127.0.0.1:8080", "listen address")
	provURL := s.String("PROVIDER_URL", "http://127.0.0.1:9300", "base URL of the payment provider")
	provKey := s.Secret("PROVIDER_API_KEY", "sk_sim", "API key sent to the provider")
	secrets := s.Secret("WEBHOOK_SECRETS", "whsec_dev", "comma-separated accepted webhook signing secrets")
	lockTTL := s.Duration("IDEMPOTENCY_LOCK_TTL", 30*time.Second, "how long an in-progress key stays locked to its owner")
	keyTTL := s.Duration("IDEMPOTENCY_KEY_TTL", 48*time.Hour, "how long a key and its stored response are kept")
	callTimeout := s.Duration("PROVIDER_CALL_TIMEOUT", 3*time.Second, "timeout of one HTTP call to the provider")
	budget := s.Duration("PROVIDER_RETRY_BUDGET", 8*time.Second, "total time spent retrying one provider call")
	failures := s.Int("PROVIDER_BREAKER_FAILURES", 5, "consecutive failed provider calls that open the breaker")
	cooldown := s.Duration("PROVIDER_BREAKER_COOLDOWN", 10*time.Second, "how long the breaker stays open")
	natsURL := s.String("NATS_URL", "nats://127.0.0.1:4222", "NATS JetStream server for the outbox relay")
	relay := s.Bool("OUTBOX_RELAY", true, "on: publish outbox events to JetStream; off: leave them in the table")
	migrate := s.Bool("AUTO_MIGRATE", true, "run migrations at startup")
	shutdown := s.Duration("SHUTDOWN_TIMEOUT", 15*time.Second, "how long to drain in-flight requests on SIGTERM")
	fp := s.String("PAYMENTSVC_FAILPOINT", "", "testing only: die at this failpoint")
	return func() Config {
		return Config{
			DatabaseURL: *dbURL, HTTPAddr: *addr, ProviderURL: *provURL, ProviderAPIKey: *provKey,
			WebhookSecrets: splitSecrets(*secrets), LockTTL: *lockTTL, KeyTTL: *keyTTL,
			CallTimeout: *callTimeout, RetryBudget: *budget, BreakerFailures: *failures,
			BreakerCooldown: *cooldown, NATSURL: *natsURL, OutboxRelay: *relay, AutoMigrate: *migrate,
			ShutdownTimeout: *shutdown, Failpoint: *fp,
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

// Payments is the create path's part of the configuration.
func (c Config) Payments() payments.Config {
	return payments.Config{
		LockTTL: c.LockTTL, KeyTTL: c.KeyTTL, CallTimeout: c.CallTimeout,
		RetryBudget: c.RetryBudget, BreakerCooldown: c.BreakerCooldown,
	}
}
