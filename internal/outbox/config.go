package outbox

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Defaults of Config; the stream and subject are those docs/operations.md ("Events") names.
const (
	DefaultNATSURL        = "nats://127.0.0.1:4222"
	DefaultBatchSize      = 100
	DefaultPollInterval   = time.Second
	DefaultWakeInterval   = 50 * time.Millisecond
	DefaultStream         = "PAYMENTS"
	DefaultStreamSubjects = "payments.>"
	DefaultSource         = "paymentsvc"
	DefaultPublishTimeout = 5 * time.Second
	DefaultBatchTimeout   = 30 * time.Second
	DefaultPingInterval   = time.Second
	DefaultFlushTimeout   = 2 * time.Second
	DefaultListenPing     = 5 * time.Second
	DefaultBackoffMin     = time.Second
	DefaultBackoffMax     = time.Minute

	// MaxPingsOutstanding is how many of the relay's pings may go unanswered
	// before the client takes the server for gone and reconnects: a silent
	// server is noticed within (MaxPingsOutstanding + 1) × PingInterval.
	MaxPingsOutstanding = 2

	// MaxBatchSize bounds a batch: its rows stay locked, and its PubAcks in
	// flight, until the whole batch is settled.
	MaxBatchSize = 1000
)

// Config configures a Relay. No field's zero is a legal value (a relay needs
// a server, a batch, a poll interval, timeouts and backoff bounds), so a zero
// field takes its default above; validate refuses negative ones.
type Config struct {
	// NATSURL is the NATS server (or comma-separated servers) to publish to.
	NATSURL string
	// BatchSize is the most rows one transaction claims and publishes.
	BatchSize int
	// PollInterval is how often the relay looks for due rows when no NOTIFY
	// woke it: the fallback for lost notifications and for retries whose
	// backoff expired.
	PollInterval time.Duration
	// WakeInterval is the least time from the start of one batch to the
	// start of a batch that a wake-up (a NOTIFY, a Wakeup) starts: an
	// event written after a quiet spell is claimed at once, but under load
	// the rows of many commits go in one batch instead of a batch each,
	// whose claim, mark and commit would cost the database more than the
	// rows themselves. At most PollInterval.
	WakeInterval time.Duration
	// Stream is the JetStream stream the relay creates if missing.
	Stream string
	// StreamReplicas is how many servers of a JetStream cluster keep a copy
	// of Stream when the relay creates it (1 to MaxStreamReplicas); an
	// existing stream keeps its own.
	StreamReplicas int
	// StreamSubjects are the subjects of Stream when the relay creates it;
	// they must take every event's subject (SubjectPrefix + Subject(type)).
	StreamSubjects []string
	// SubjectPrefix is put before every event's subject (payments.succeeded
	// and the others, see Subject): empty in production; tests and shared
	// brokers use it to keep streams apart.
	SubjectPrefix string
	// Source is the CloudEvents source attribute.
	Source string
	// PublishTimeout bounds the wait for the PubAcks of one batch.
	PublishTimeout time.Duration
	// PingInterval is how often the NATS client pings the server; after
	// MaxPingsOutstanding unanswered pings it drops the connection (the
	// batch's PubAcks in flight fail at once) and reconnects. nats.go's own
	// default, two minutes, would leave a silent server unnoticed for
	// minutes.
	PingInterval time.Duration
	// FlushTimeout bounds each write of the client to the server's socket
	// (nats.FlusherTimeout): a server that stops reading fails the write
	// instead of holding it.
	FlushTimeout time.Duration
	// ListenPing is how long the LISTEN session may stay quiet before the
	// relay pings it (bounded by DATABASE_TIMEOUT): a session whose server
	// went silent is replaced instead of waited on for ever, which would
	// leave every event to the poll.
	ListenPing time.Duration
	// BatchTimeout bounds one batch's transaction: claim, publish, mark.
	// The server also ends the transaction (and frees its rows for the
	// other relays) once it has been idle that long, should the relay go
	// silent mid-batch.
	BatchTimeout time.Duration
	// BackoffMin and BackoffMax bound the jittered exponential backoff of a
	// row whose publish failed and of the relay while NATS or Postgres fail.
	// Keep PublishTimeout + BackoffMax well under the stream's duplicate
	// window (MinDuplicateWindow): a row whose PubAck was lost or late is
	// sent again after its backoff, and only inside the window does
	// JetStream drop the copy (consumers dedupe either way).
	BackoffMin time.Duration
	BackoffMax time.Duration
	// Logger receives the relay's logs; nil discards them.
	Logger *slog.Logger
	// Fanout, if set, is given each batch's acknowledged events in the
	// transaction that marks them published (the merchant webhooks'
	// deliveries, internal/delivery); nil: nothing is.
	Fanout Fanout
	// Wakeup, if set, is this process's own wake-up (see Wakeup): signalled
	// after a commit that wrote outbox rows without a NOTIFY (the create
	// path's). nil: only NOTIFYs and the poll wake the relay.
	Wakeup Wakeup

	// hooks are test signals; the zero value does nothing.
	hooks hooks
}

// hooks let tests observe the relay and crash it at chosen points.
type hooks struct {
	beforePublish func(eventID string) // a row is about to be sent
	afterPublish  func()               // the batch's PubAcks are in, nothing is marked yet
	afterBatch    func(batchResult)    // the batch is committed
}

func (c Config) withDefaults() Config {
	if c.NATSURL == "" {
		c.NATSURL = DefaultNATSURL
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.WakeInterval == 0 {
		c.WakeInterval = min(DefaultWakeInterval, c.PollInterval)
	}
	if c.Stream == "" {
		c.Stream = DefaultStream
	}
	if c.StreamReplicas == 0 {
		c.StreamReplicas = DefaultStreamReplicas
	}
	if len(c.StreamSubjects) == 0 {
		c.StreamSubjects = []string{DefaultStreamSubjects}
	}
	if c.Source == "" {
		c.Source = DefaultSource
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = DefaultPublishTimeout
	}
	if c.BatchTimeout == 0 {
		c.BatchTimeout = DefaultBatchTimeout
	}
	if c.PingInterval == 0 {
		c.PingInterval = DefaultPingInterval
	}
	if c.FlushTimeout == 0 {
		c.FlushTimeout = DefaultFlushTimeout
	}
	if c.ListenPing == 0 {
		c.ListenPing = DefaultListenPing
	}
	if c.BackoffMin == 0 {
		c.BackoffMin = DefaultBackoffMin
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.BatchSize < 1 || c.BatchSize > MaxBatchSize {
		errs = append(errs, fmt.Errorf("BatchSize %d not in [1, %d]", c.BatchSize, MaxBatchSize))
	}
	if c.PollInterval < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("PollInterval %s below 10ms", c.PollInterval))
	}
	if c.WakeInterval < 0 || c.WakeInterval > c.PollInterval {
		errs = append(errs, fmt.Errorf("WakeInterval %s not in [0, PollInterval %s]", c.WakeInterval, c.PollInterval))
	}
	if c.PublishTimeout <= 0 || c.BatchTimeout <= c.PublishTimeout {
		// The marks must still fit in the transaction after the PubAck wait.
		errs = append(errs, fmt.Errorf("need 0 < PublishTimeout (%s) < BatchTimeout (%s)", c.PublishTimeout, c.BatchTimeout))
	}
	if c.PingInterval <= 0 || c.FlushTimeout <= 0 || c.ListenPing <= 0 {
		errs = append(errs, fmt.Errorf("need PingInterval (%s), FlushTimeout (%s) and ListenPing (%s) positive", c.PingInterval, c.FlushTimeout, c.ListenPing))
	}
	if c.BackoffMin <= 0 || c.BackoffMax < c.BackoffMin {
		errs = append(errs, fmt.Errorf("need 0 < BackoffMin (%s) <= BackoffMax (%s)", c.BackoffMin, c.BackoffMax))
	}
	if gap := c.PublishTimeout + c.BackoffMax; gap > MinDuplicateWindow/2 {
		// A retry must land well inside the window of the try it repeats,
		// or JetStream keeps both copies.
		errs = append(errs, fmt.Errorf("PublishTimeout + BackoffMax (%s) must be at most half the duplicate window (%s)", gap, MinDuplicateWindow))
	}
	if c.StreamReplicas < 1 || c.StreamReplicas > MaxStreamReplicas {
		errs = append(errs, fmt.Errorf("StreamReplicas %d not in [1, %d]", c.StreamReplicas, MaxStreamReplicas))
	}
	for _, s := range c.StreamSubjects {
		if !validSubject(s, true) {
			errs = append(errs, fmt.Errorf("StreamSubjects: %q is not a NATS subject", s))
		}
	}
	for _, sub := range c.subjects() {
		if !validSubject(sub, false) {
			errs = append(errs, fmt.Errorf("SubjectPrefix %q makes %q, not a literal NATS subject", c.SubjectPrefix, sub))
			break
		}
		if !slices.ContainsFunc(c.StreamSubjects, func(f string) bool { return subjectMatches(f, sub) }) {
			errs = append(errs, fmt.Errorf("StreamSubjects %q do not take the subject %q", c.StreamSubjects, sub))
		}
	}
	if c.Stream == "" || strings.ContainsAny(c.Stream, " \t.*>/\\") {
		errs = append(errs, fmt.Errorf("Config.Stream %q is not a valid stream name", c.Stream))
	}
	return errors.Join(errs...)
}

// subjects are the subjects the relay publishes on.
func (c Config) subjects() []string {
	out := make([]string, 0, len(eventSubjects))
	for _, t := range eventTypes {
		out = append(out, c.SubjectPrefix+eventSubjects[t])
	}
	return out
}
