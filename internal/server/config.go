// Package server wires paymentsvc together: configuration, database,
// provider, HTTP API, webhooks and the outbox relay, and runs them until a
// signal asks it to drain and stop. cmd/paymentsvc only parses arguments.
package server

import (
	"strings"
	"time"

	"github.com/acme/paymentsvc/internal/envflag"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/settings"
)

// Config is paymentsvc's configuration (CONTRACT §2).
type Config struct {
	settings.Shared
	HTTPAddr        string
	WebhookSecrets  []string
	NATSURL         string
	StreamReplicas  int
	OutboxRelay     bool
	AutoMigrate     bool
	ShutdownTimeout time.Duration
	Failpoint       string
}

// Flags registers every setting on s and returns a function that yields the
// parsed Config.
func Flags(s *envflag.Set) func() Config {
	shared := settings.Register(s, "PostgreSQL URL; the database is created if missing")
	addr := s.String("HTTP_ADDR", "127.0.0.1:8080", "listen address")
	secrets := s.Secret("WEBHOOK_SECRETS", "whsec_dev", "comma-separated accepted webhook signing secrets")
	natsURL := s.String("NATS_URL", "nats://127.0.0.1:4222", "NATS JetStream server, or comma-separated servers of one cluster, for the outbox relay")
	replicas := s.Int("OUTBOX_STREAM_REPLICAS", outbox.DefaultStreamReplicas, "replicas (1-5) of the PAYMENTS stream when the relay creates it; an existing stream is left as it is")
	relay := s.Bool("OUTBOX_RELAY", true, "on: publish outbox events to JetStream; off: leave them in the table")
	migrate := s.Bool("AUTO_MIGRATE", true, "run migrations at startup")
	shutdown := s.Duration("SHUTDOWN_TIMEOUT", 15*time.Second, "how long to drain in-flight requests on SIGTERM")
	fp := s.String("PAYMENTSVC_FAILPOINT", "", "testing only: die at this failpoint")
	return func() Config {
		return Config{
			Shared: shared(), HTTPAddr: *addr, WebhookSecrets: splitSecrets(*secrets),
			NATSURL: *natsURL, StreamReplicas: *replicas, OutboxRelay: *relay, AutoMigrate: *migrate,
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
