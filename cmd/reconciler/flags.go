package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/acme/paymentsvc/internal/envflag"
	"github.com/acme/paymentsvc/internal/reconcile"
	sharedsettings "github.com/acme/paymentsvc/internal/settings"
)

// settings is one command's configuration.
type settings struct {
	shared func() sharedsettings.Shared // read after parsing

	// run
	minAge    *time.Duration
	batchSize *int
	// settle
	day *string
	// gc
	webhookEventTTL *time.Duration
	outboxRetention *time.Duration
}

// newFlags registers the settings of command cmd. RECONCILER_MIN_AGE and
// RECONCILER_BATCH_SIZE are namespaced aliases of MIN_AGE and BATCH_SIZE
// (the variables the naming rule of docs/configuration.md gives --min-age and
// --batch-size) and win over them, for crontabs shared with other jobs.
func newFlags(cmd string, getenv func(string) (string, bool)) (*envflag.Set, *settings) {
	lookup := func(name string) (string, bool) {
		switch name {
		case "MIN_AGE", "BATCH_SIZE":
			if v, ok := getenv("RECONCILER_" + name); ok && v != "" {
				return v, true
			}
		}
		return getenv(name)
	}
	set := envflag.NewWithLookup("reconciler "+cmd, lookup)
	set.SetUsageHeader(commandsUsage + fmt.Sprintf("\nFlags of %q:", cmd))
	s := &settings{shared: sharedsettings.Register(set, "PostgreSQL URL of the payments database (never created by the reconciler)")}
	switch cmd {
	case "run":
		s.minAge = set.Duration("MIN_AGE", reconcile.DefaultMinAge, "act only on attempts unchanged for this long; 0s: no minimum [env RECONCILER_MIN_AGE wins]")
		s.batchSize = set.Int("BATCH_SIZE", reconcile.DefaultBatchSize, fmt.Sprintf("attempts claimed per batch, 1-%d [env RECONCILER_BATCH_SIZE wins]", reconcile.MaxBatchSize))
	case "settle":
		s.day = set.FlagSet().String("day", "", "the UTC day to settle, YYYY-MM-DD (required)")
	case "gc":
		s.webhookEventTTL = set.Duration("WEBHOOK_EVENT_TTL", reconcile.DefaultWebhookEventTTL, "delete webhook events received longer ago than this; 0s: every one")
		s.outboxRetention = set.Duration("OUTBOX_RETENTION", reconcile.DefaultOutboxRetention, "delete outbox rows published longer ago than this (never unpublished ones); 0s: every published one")
	}
	return set, s
}

// check refuses values no run could use; the caller exits 2.
func (s *settings) check() error {
	var errs []error
	if s.minAge != nil && *s.minAge < 0 {
		errs = append(errs, fmt.Errorf("--min-age %s is negative", *s.minAge))
	}
	if s.webhookEventTTL != nil && *s.webhookEventTTL < 0 {
		errs = append(errs, fmt.Errorf("--webhook-event-ttl %s is negative", *s.webhookEventTTL))
	}
	if s.outboxRetention != nil && *s.outboxRetention < 0 {
		errs = append(errs, fmt.Errorf("--outbox-retention %s is negative", *s.outboxRetention))
	}
	if s.batchSize != nil && (*s.batchSize < 1 || *s.batchSize > reconcile.MaxBatchSize) {
		errs = append(errs, fmt.Errorf("--batch-size %d not in [1, %d]", *s.batchSize, reconcile.MaxBatchSize))
	}
	if n := s.shared().BreakerFailures; n < 1 {
		errs = append(errs, fmt.Errorf("PROVIDER_BREAKER_FAILURES %d is not positive", n))
	}
	if s.day != nil {
		if *s.day == "" {
			errs = append(errs, errors.New("--day YYYY-MM-DD is required"))
		} else if _, err := reconcile.ParseDay(*s.day); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// config is the job's configuration: the flags' values, and the library's
// defaults for what has no flag. An explicit --min-age 0s is kept: it means
// no minimum.
func (s *settings) config() reconcile.Config {
	c := reconcile.DefaultConfig()
	if s.minAge != nil {
		c.MinAge = *s.minAge
	}
	if s.batchSize != nil {
		c.BatchSize = *s.batchSize
		c.Workers = min(reconcile.DefaultWorkers, c.BatchSize)
	}
	if s.webhookEventTTL != nil {
		c.WebhookEventTTL = *s.webhookEventTTL
	}
	if s.outboxRetention != nil {
		c.OutboxRetention = *s.outboxRetention
	}
	return c
}

const commandsUsage = `Usage: reconciler [run|settle|gc] [flags]

A one-shot job, run from cron, that makes the payments database and the
provider agree. Prints one JSON line on stdout; logs JSON to stderr.

Commands:
  run      (default) resolve CREATED, PENDING and UNKNOWN payments, refunds,
           captures and voids older than --min-age that are due for a check,
           and check AUTHORIZED payments past their capture_before (whatever
           --min-age); prints
           {"checked","succeeded","failed","still_unknown","needs_review","errors",
            "refunds":{…},"captures":{…},"voids":{…},"expired","authorized"}
  settle   --day YYYY-MM-DD: compare the provider's charges of that UTC day with
           our payments, refund orphan charges and void orphan authorizations;
           prints {"day","provider_charges","matched","orphans_refunded",
           "orphans_voided","amount_mismatches","missing_at_provider","foreign"}
  gc       delete expired idempotency keys of final payments, webhook events
           received more than --webhook-event-ttl (WEBHOOK_EVENT_TTL, default
           720h) ago and outbox rows published more than --outbox-retention
           (OUTBOX_RETENTION, default 168h) ago, never unpublished ones; prints
           {"deleted","webhook_events_deleted","outbox_deleted"}

Exit status: 0 the job ran, 1 it could not run (database or provider
unreachable, invalid configuration), 2 bad usage.

Run "reconciler COMMAND -h" for a command's flags. Every flag can also be set
by the environment variable named after it (--database-url ⇔ DATABASE_URL).

Tracing (environment only, the OpenTelemetry SDK's variables): on when
OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (and
OTEL_SDK_DISABLED is not true); OTEL_SERVICE_NAME defaults to "reconciler".
`

// topUsage answers "reconciler -h" and an unknown command.
func topUsage(w io.Writer, getenv func(string) (string, bool)) {
	set, _ := newFlags("run", getenv)
	set.FlagSet().SetOutput(w)
	set.FlagSet().Usage()
}
