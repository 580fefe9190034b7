package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/acme/paymentsvc/internal/db"
)

// Deliverer makes the attempts of the pending deliveries: one per pod
// (MERCHANT_WEBHOOKS=on), sharing the queue with the others through SKIP
// LOCKED claims. See doc.go.
type Deliverer struct {
	pool   *db.Pool
	cfg    Config
	log    *slog.Logger
	client *http.Client

	mu        sync.Mutex
	endpoints map[string]*endpointState // of the endpoints the pod held lately
	held      int                       // deliveries held: claimed and not yet finished
	full      bool                      // the pod held its Concurrency at a claim
	room      chan struct{}             // an endpoint that had its fill, or the pod, has room again
	results   chan result
}

// endpointState is what the pod knows of one endpoint.
type endpointState struct {
	slots    chan struct{} // one per attempt in flight
	held     int
	fast     bool // its last attempt took less than fast(): hold queueFactor rounds, not one
	full     bool // the pod held its fill at the last claim
	lastUsed time.Time
}

// NewDeliverer returns a deliverer of the deliveries in pool; it fails only
// on an invalid cfg.
func NewDeliverer(pool *db.Pool, cfg Config) (*Deliverer, error) {
	if pool == nil {
		return nil, errors.New("delivery: nil pool")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("delivery: invalid config: %w", err)
	}
	cfg = cfg.withDefaults()
	return &Deliverer{
		pool: pool, cfg: cfg, log: cfg.Logger.With("component", "merchant_webhooks"), client: newClient(cfg),
		endpoints: map[string]*endpointState{},
		room:      make(chan struct{}, 1),
		results:   make(chan result, cfg.Concurrency),
	}, nil
}

// Run delivers until ctx ends. Then it claims nothing more, gives back what
// it holds and has not started, lets the attempts in flight finish for up
// to ShutdownGrace (cutting the rest off), records every result and
// returns nil. A database that fails is logged and retried with backoff:
// nothing is lost, since only a recorded result changes a delivery, and a
// claim that is never recorded lapses by itself.
func (d *Deliverer) Run(ctx context.Context) error {
	// The attempts' context: it outlives ctx by the grace.
	attempts, cutOff := context.WithCancel(context.WithoutCancel(ctx))
	defer cutOff()
	stopping := ctx.Done()
	var jobs, bg sync.WaitGroup
	bg.Go(func() { d.record(context.WithoutCancel(ctx)) })
	wake := make(chan struct{}, 1)
	listenCtx, stopListening := context.WithCancel(ctx)
	bg.Go(func() { d.listen(listenCtx, wake) })

	d.log.Info("merchant webhooks delivering", "timeout", d.cfg.Timeout.String(), "schedule", FormatSchedule(d.cfg.Schedule),
		"concurrency", d.cfg.Concurrency, "endpoint_concurrency", d.cfg.EndpointConcurrency, "allow_private", d.cfg.AllowPrivate)
	d.dispatch(ctx, wake, func(j job, st *endpointState) {
		jobs.Go(func() { d.run(attempts, stopping, j, st) })
	})

	stopListening()
	grace := time.AfterFunc(d.cfg.ShutdownGrace, cutOff)
	jobs.Wait()
	grace.Stop()
	close(d.results)
	bg.Wait()
	d.log.Info("merchant webhooks stopped")
	return nil
}

// dispatch claims due deliveries and starts each with start until ctx ends.
func (d *Deliverer) dispatch(ctx context.Context, wake <-chan struct{}, start func(job, *endpointState)) {
	failures := 0
	for ctx.Err() == nil {
		claimed, asked, err := d.claim(ctx, start)
		wait := jitter(d.cfg.PollInterval)
		switch {
		case err != nil && ctx.Err() == nil:
			failures++
			wait = backoffDelay(failures)
			d.log.Warn("claim merchant webhook deliveries failed; backing off", "err", err, "failures", failures, "retry_in", wait)
		case asked > 0 && claimed == asked:
			failures = 0
			continue // a full batch: more are probably due
		default:
			failures = 0
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-wake:
		case <-d.room:
		}
		t.Stop()
	}
}

// run waits for a slot of j's endpoint, attempts j and hands over the
// result. A job still waiting when the pod stops, or after a Timeout (its
// endpoint stopped keeping up), is given back instead, so no claim is held
// beyond its lease.
func (d *Deliverer) run(attempts context.Context, stopping <-chan struct{}, j job, st *endpointState) {
	defer d.finished(j, st)
	waited := time.NewTimer(d.cfg.Timeout)
	select {
	case st.slots <- struct{}{}:
		waited.Stop()
	case <-stopping:
		d.results <- result{job: j, release: true}
		return
	case <-waited.C:
		d.results <- result{job: j, release: true}
		return
	}
	select {
	case <-stopping: // both ready: the pod stopping wins
		<-st.slots
		d.results <- result{job: j, release: true}
		return
	default:
	}
	r := d.attempt(attempts, j)
	<-st.slots
	d.mu.Lock()
	st.fast = r.duration < d.cfg.fast()
	d.mu.Unlock()
	d.results <- r
}

// finished lets go of j, and signals room when its endpoint or the pod drops
// to half of what it may hold after having had its fill.
func (d *Deliverer) finished(j job, st *endpointState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st.held--
	st.lastUsed = time.Now()
	d.held--
	switch {
	case st.full && st.held <= d.hold(st)/2:
		st.full = false
	case d.full && d.held <= d.cfg.Concurrency/2:
		d.full = false
	case d.held == 0:
	default:
		return
	}
	db.Signal(d.room)
}

// hold is the most deliveries of st's endpoint the pod holds. Under d.mu.
func (d *Deliverer) hold(st *endpointState) int {
	if !st.fast {
		return d.cfg.EndpointConcurrency
	}
	return d.cfg.endpointHold()
}
