package reconcile

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/acme/paymentsvc/internal/payments"
)

// Defaults of Config.
const (
	DefaultMinAge      = 2 * time.Minute
	DefaultBatchSize   = 100
	DefaultWorkers     = 4
	DefaultLease       = 5 * time.Minute
	DefaultJitter      = 0.2
	DefaultGCBatchSize = 1000
	// DefaultWebhookEventTTL and DefaultOutboxRetention are the documented
	// defaults of WEBHOOK_EVENT_TTL and OUTBOX_RETENTION (docs/configuration.md).
	DefaultWebhookEventTTL = 720 * time.Hour
	DefaultOutboxRetention = 168 * time.Hour

	// MaxBatchSize bounds a claim: its attempts wait on the lease until the
	// batch is done.
	MaxBatchSize = 1000
)

// DefaultSchedule is the wait before each further check of an attempt that a
// check left unresolved: after the first check 2m, after the second 10m, and
// so on. Once it is spent the attempt needs review and is checked daily.
var DefaultSchedule = []time.Duration{2 * time.Minute, 10 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour}

// Config configures a Reconciler. A zero field whose zero is not a legal
// value (BatchSize, Workers, Lease, GCBatchSize, a nil Schedule, the Payments
// timings) takes the default above. MinAge, Jitter, WebhookEventTTL and
// OutboxRetention are kept as given, because their zero is legal and means
// something (no minimum age, no jitter, keep nothing): DefaultConfig has
// their defaults, and cmd/reconciler registers its flags with them.
type Config struct {
	// MinAge is how long an attempt must have been unchanged before Run
	// touches it (--min-age); 0 means no minimum.
	MinAge time.Duration
	// BatchSize is the most attempts one claim takes (--batch-size).
	BatchSize int
	// Workers is how many attempts of a batch are checked at once.
	Workers int
	// Lease is how far a claim pushes next_check_at out. No check of a batch
	// starts later than Lease - IDEMPOTENCY_LOCK_TTL after its claim, so every
	// check (bounded by the retry budget and call timeout, which are shorter
	// than the lock TTL) ends while the lease still keeps others away.
	Lease time.Duration
	// Schedule is the wait before each further check; see DefaultSchedule.
	Schedule []time.Duration
	// Jitter spreads every scheduled wait by ±Jitter of itself, so that
	// attempts that failed together are not all checked again together; 0
	// means none.
	Jitter float64
	// GCBatchSize is the most rows one GC statement deletes.
	GCBatchSize int
	// WebhookEventTTL is how long GC keeps a received webhook event
	// (WEBHOOK_EVENT_TTL); 0 keeps none.
	WebhookEventTTL time.Duration
	// OutboxRetention is how long GC keeps a published outbox row
	// (OUTBOX_RETENTION); 0 keeps none. Unpublished rows are always kept.
	OutboxRetention time.Duration
	// Logger receives the job's logs; nil discards them.
	Logger *slog.Logger

	// rand returns a number in [0, 1) for the jitter; nil means math/rand/v2.
	rand func() float64
}

// DefaultConfig is the reconciler's configuration when nothing is set:
// every default above, MinAge and Jitter included.
func DefaultConfig() Config {
	return Config{
		MinAge: DefaultMinAge, Jitter: DefaultJitter,
		WebhookEventTTL: DefaultWebhookEventTTL, OutboxRetention: DefaultOutboxRetention,
	}.withDefaults()
}

// withDefaults fills the zero fields whose zero is not a legal value.
func (c Config) withDefaults() Config {
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.Schedule == nil {
		c.Schedule = DefaultSchedule
	}
	if c.GCBatchSize == 0 {
		c.GCBatchSize = DefaultGCBatchSize
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.rand == nil {
		c.rand = rand.Float64
	}
	return c
}

// Validate reports every setting that cannot work, after defaults.
func (c Config) Validate() error {
	return c.validate(payments.Config{}.WithDefaults())
}

// validate is Validate for a reconciler whose payments service has the
// timing settings timing (IDEMPOTENCY_LOCK_TTL and friends: the reconciler
// reads the same variables as the pods, because "not found at the
// provider" and its leases are judged from them).
func (c Config) validate(timing payments.Config) error {
	c = c.withDefaults()
	var errs []error
	if c.MinAge < 0 {
		errs = append(errs, fmt.Errorf("MinAge %s is negative", c.MinAge))
	}
	if c.BatchSize < 1 || c.BatchSize > MaxBatchSize {
		errs = append(errs, fmt.Errorf("BatchSize %d not in [1, %d]", c.BatchSize, MaxBatchSize))
	}
	if c.Workers < 1 || c.Workers > c.BatchSize {
		errs = append(errs, fmt.Errorf("Config.Workers %d not in [1, BatchSize %d]", c.Workers, c.BatchSize))
	}
	if c.Lease < 2*timing.LockTTL {
		// Checks start only in the first Lease - LockTTL of a batch.
		errs = append(errs, fmt.Errorf("Config.Lease %s must be at least twice IDEMPOTENCY_LOCK_TTL (%s)", c.Lease, timing.LockTTL))
	}
	if len(c.Schedule) == 0 {
		errs = append(errs, errors.New("Config.Schedule is empty"))
	}
	for i, d := range c.Schedule {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("Config.Schedule[%d] %s is not positive", i, d))
		}
	}
	if c.Jitter < 0 || c.Jitter >= 1 {
		errs = append(errs, fmt.Errorf("Config.Jitter %v not in [0, 1)", c.Jitter))
	}
	if c.GCBatchSize < 1 || c.GCBatchSize > 10000 {
		errs = append(errs, fmt.Errorf("GCBatchSize %d not in [1, 10000]", c.GCBatchSize))
	}
	if c.WebhookEventTTL < 0 || c.OutboxRetention < 0 {
		errs = append(errs, fmt.Errorf("WEBHOOK_EVENT_TTL (%s) and OUTBOX_RETENTION (%s) must not be negative", c.WebhookEventTTL, c.OutboxRetention))
	}
	return errors.Join(errs...)
}

// nextDelay is the wait after a check that left an attempt unresolved, given
// its check count after that check, and whether the schedule is now spent.
func (c Config) nextDelay(checks int) (time.Duration, bool) {
	i, spent := checks-1, checks > len(c.Schedule)
	if spent || i >= len(c.Schedule) {
		i = len(c.Schedule) - 1
	}
	if i < 0 {
		i = 0
	}
	return c.jitter(c.Schedule[i]), spent
}

// jitter spreads d uniformly over [d(1-Jitter), d(1+Jitter)).
func (c Config) jitter(d time.Duration) time.Duration {
	f := 1 + c.Jitter*(2*c.rand()-1)
	return time.Duration(float64(d) * f)
}
