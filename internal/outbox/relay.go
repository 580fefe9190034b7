package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/redact"
)

// Relay publishes the outbox to JetStream. Run one per pod; relays share the
// table through SKIP LOCKED claims.
type Relay struct {
	pool *db.Pool
	cfg  Config
	log  *slog.Logger
}

// NewRelay returns a relay for the outbox in pool, cfg completed with the
// defaults. It fails only on an invalid cfg; it does not connect.
func NewRelay(pool *db.Pool, cfg Config) (*Relay, error) {
	if pool == nil {
		return nil, errors.New("outbox: nil pool")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("outbox: invalid config: %w", err)
	}
	return &Relay{pool: pool, cfg: cfg, log: cfg.Logger.With("component", "outbox_relay")}, nil
}

// Run publishes due outbox rows until ctx ends, then returns nil after
// settling the batch in flight. NATS and Postgres failures, including a NATS
// server that is down at startup, are logged and retried with backoff: they
// delay events but never drop them, since a row leaves the queue only once
// JetStream acknowledged it.
func (r *Relay) Run(ctx context.Context) error {
	connected := make(chan struct{}, 1)
	nc, err := r.connect(ctx, connected)
	if err != nil {
		return nil // only when ctx ended
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(r.cfg.PublishTimeout))
	if err != nil {
		return fmt.Errorf("outbox: jetstream: %w", err)
	}

	// NOTIFYs and the process's own Wakeup wake the relay alike: both
	// land on one coalescing channel.
	wake := r.cfg.Wakeup
	if wake == nil {
		wake = NewWakeup()
	}
	dbUp := make(chan struct{}, 1)
	listenCtx, stopListening := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { r.listen(listenCtx, wake, dbUp) })
	defer wg.Wait()
	defer stopListening()

	r.log.Info("outbox relay running", "stream", r.cfg.Stream, "subject_prefix", r.cfg.SubjectPrefix,
		"batch_size", r.cfg.BatchSize, "poll_interval", r.cfg.PollInterval.String())
	l := &loop{r: r, nc: nc, js: js, wake: wake, connected: connected, dbUp: dbUp}
	for ctx.Err() == nil {
		d, onNotify := l.once(ctx)
		l.wait(ctx, d, onNotify)
	}
	r.log.Info("outbox relay stopped")
	return nil
}

// connect dials NATS. With RetryOnFailedConnect the client itself keeps
// retrying an unreachable server in the background, so this loops only on
// errors that option does not cover (a bad URL, for one), which are logged
// until ctx ends instead of killing the pod.
func (r *Relay) connect(ctx context.Context, connected chan<- struct{}) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name("paymentsvc-outbox-relay"),
		// A server that stops answering (a partition, a frozen host: the
		// connection stays open) is noticed within seconds, not minutes.
		nats.PingInterval(r.cfg.PingInterval),
		nats.MaxPingsOutstanding(MaxPingsOutstanding),
		nats.FlusherTimeout(r.cfg.FlushTimeout),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(r.cfg.BackoffMin),
		nats.ReconnectJitter(r.cfg.BackoffMin/2, r.cfg.BackoffMin),
		// Publishing while disconnected fails at once instead of filling a
		// client buffer: the outbox table is the durable buffer.
		nats.ReconnectBufSize(-1),
		nats.ConnectHandler(func(*nats.Conn) {
			r.log.Info("connected to NATS")
			signal(connected)
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			r.log.Info("reconnected to NATS")
			signal(connected)
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: our own Close at shutdown
				r.log.Warn("disconnected from NATS; outbox rows wait", "err", err)
			}
		}),
	}
	for failures := 1; ; failures++ {
		nc, err := nats.Connect(r.cfg.NATSURL, opts...)
		if err == nil {
			return nc, nil
		}
		// The error may quote the URL (url.Parse's do): masked as well.
		r.log.Error("connect to NATS", "url", redact.URL(r.cfg.NATSURL), "err", redact.Text(err.Error(), r.cfg.NATSURL))
		if !sleep(ctx, backoff(failures, r.cfg.BackoffMin, r.cfg.BackoffMax)) {
			return nil, ctx.Err()
		}
	}
}

// loop is the state of one Run.
type loop struct {
	r           *Relay
	nc          *nats.Conn
	js          jetstream.JetStream
	wake        <-chan struct{} // a NOTIFY arrived, or the Wakeup was signalled
	connected   <-chan struct{} // NATS (re)connected
	dbUp        <-chan struct{} // the LISTEN connection is back after a failure
	streamReady bool
	failures    int       // consecutive iterations that published nothing because of errors
	batchAt     time.Time // when the last iteration started
	gaugesAt    time.Time
}

// once runs one iteration and returns how long to wait before the next and
// whether a NOTIFY or a Wakeup may cut that wait short (not while backing
// off).
func (l *loop) once(ctx context.Context) (time.Duration, bool) {
	cfg := l.r.cfg
	l.batchAt = time.Now()
	// At most once per PollInterval: Stats counts the whole backlog, which a
	// relay draining full batches back to back should not pay per batch.
	if time.Since(l.gaugesAt) >= cfg.PollInterval {
		l.r.refreshGauges(ctx)
		l.gaugesAt = time.Now()
	}
	if !l.nc.IsConnected() {
		// Claiming now would only spend publish attempts; the reconnect
		// handler ends the wait early.
		return jitter(cfg.PollInterval), false
	}
	if !l.streamReady {
		sctx, cancel := context.WithTimeout(ctx, cfg.PublishTimeout)
		err := ensureStream(sctx, l.js, cfg.Stream, cfg.StreamSubjects, cfg.subjects(), cfg.StreamReplicas)
		cancel()
		if err != nil {
			return l.fail("ensure stream", err)
		}
		l.streamReady = true
	}
	res, err := l.r.publishBatch(ctx, l.js)
	if err != nil {
		return l.fail("outbox batch", err)
	}
	if res.noStream {
		l.streamReady = false // deleted, or the server lost its store: recreate it
	}
	if res.failed > 0 && res.published == 0 {
		return l.fail("outbox publish", res.firstErr)
	}
	l.failures = 0
	if res.claimed == cfg.BatchSize {
		return 0, false // a full batch: more rows are probably due
	}
	return jitter(cfg.PollInterval), true
}

func (l *loop) fail(what string, err error) (time.Duration, bool) {
	l.failures++
	d := backoff(l.failures, l.r.cfg.BackoffMin, l.r.cfg.BackoffMax)
	l.r.log.Warn(what+" failed; backing off", "err", err, "failures", l.failures, "retry_in", d.String())
	return d, false
}

func (l *loop) wait(ctx context.Context, d time.Duration, onNotify bool) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	var wake <-chan struct{} // nil: a NOTIFY or a Wakeup does not end this wait
	if onNotify {
		wake = l.wake
	}
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-wake:
		l.gather(ctx, t.C)
	case <-l.connected:
	case <-l.dbUp:
	}
}

// gather holds a wake-up back until WakeInterval has passed since the last
// batch started (or until the poll's own wait ends), so that under load the
// commits of that interval make one batch.
func (l *loop) gather(ctx context.Context, poll <-chan time.Time) {
	rest := l.r.cfg.WakeInterval - time.Since(l.batchAt)
	if rest <= 0 {
		return
	}
	t := time.NewTimer(rest)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-poll:
	}
}

// signal sends on a 1-buffered channel without blocking: one pending wake-up
// stands for any number.
func signal(c chan<- struct{}) { db.Signal(c) }

// sleep waits d and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
