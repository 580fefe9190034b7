package delivery

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/metrics"
)

// Bounds of the queue's database work.
const (
	// maxClaim is the most deliveries one claim takes.
	maxClaim = 256
	// scanFactor is how many due rows a claim looks at per row it may take,
	// to find rows of endpoints that are not at their fill.
	scanFactor = 4
	// maxRecordBatch is the most results one write stores.
	maxRecordBatch = 500
	// opTimeout bounds one statement of the queue.
	opTimeout = 30 * time.Second
	// endpointMemory is how long the pod remembers an endpoint it holds
	// nothing of (whether it is slow).
	endpointMemory = 10 * time.Minute
)

// claim takes the due deliveries the pod has room for and starts each with
// start. It returns how many it took and how many it asked for. The claim
// runs to its end even if ctx ends meanwhile: what it took is then given
// back by the jobs, not left to lapse.
func (d *Deliverer) claim(ctx context.Context, start func(job, *endpointState)) (claimed, asked int, err error) {
	p := d.claimParams()
	if p.MaxRows <= 0 {
		return 0, 0, nil
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	rows, err := db.Q.DeliveryClaim(qctx, d.pool, p)
	if err != nil {
		return 0, int(p.MaxRows), db.Translate(err)
	}
	jobs := make([]job, len(rows))
	states := make([]*endpointState, len(rows))
	d.mu.Lock()
	for i, row := range rows {
		j := job{id: row.ID, lease: row.Lease, step: int(row.ScheduleStep), eventID: row.EventID,
			endpointID: row.EndpointID, url: row.Url, body: row.Body}
		if row.Secret != nil {
			j.secrets = append(j.secrets, *row.Secret)
		}
		if row.PreviousSecret != "" {
			j.secrets = append(j.secrets, row.PreviousSecret)
		}
		st := d.endpoints[row.EndpointID]
		if st == nil {
			st = &endpointState{slots: make(chan struct{}, d.cfg.EndpointConcurrency)}
			d.endpoints[row.EndpointID] = st
		}
		st.held++
		st.full = st.held >= d.hold(st)
		d.held++
		jobs[i], states[i] = j, st
	}
	d.full = d.held >= d.cfg.Concurrency
	d.mu.Unlock()
	for i := range jobs {
		start(jobs[i], states[i])
	}
	return len(rows), int(p.MaxRows), nil
}

// claimParams say what the pod has room for: in all, and of each endpoint
// it knows (one at its fill is skipped outright). An endpoint that is not
// known to be fast may be held one round of EndpointConcurrency, not
// endpointHold: it is passed as holding that much more than it does, and so
// is one the pod knows nothing of yet.
func (d *Deliverer) claimParams() db.DeliveryClaimParams {
	d.mu.Lock()
	defer d.mu.Unlock()
	limit := d.cfg.endpointHold()
	p := db.DeliveryClaimParams{
		LeaseMs: d.cfg.lease().Milliseconds(), PerEndpoint: int32(limit),
		MaxRows: int32(min(maxClaim, d.cfg.Concurrency-d.held)),
		// Never nil: a NULL array would make "<> ALL" NULL for every row.
		FullEndpointIds: []string{}, HeldEndpointIds: []string{}, HeldCounts: []int32{},
	}
	p.ScanRows = p.MaxRows * scanFactor
	now := time.Now()
	for id, st := range d.endpoints {
		switch {
		case st.held == 0 && now.Sub(st.lastUsed) > endpointMemory:
			delete(d.endpoints, id)
		case st.held >= d.hold(st):
			st.full = true
			p.FullEndpointIds = append(p.FullEndpointIds, id)
		default:
			p.HeldEndpointIds = append(p.HeldEndpointIds, id)
			p.HeldCounts = append(p.HeldCounts, int32(st.held+limit-d.hold(st)))
		}
	}
	p.UnknownPerEndpoint = int32(d.cfg.EndpointConcurrency)
	return p
}

// record writes the results of the jobs, in batches of what has come in
// while the previous batch was written, until the results channel closes.
func (d *Deliverer) record(ctx context.Context) {
	for r := range d.results {
		batch := []result{r}
	more:
		for len(batch) < maxRecordBatch {
			select {
			case r, ok := <-d.results:
				if !ok {
					break more
				}
				batch = append(batch, r)
			default:
				break more
			}
		}
		d.write(ctx, batch)
	}
}

// write stores one batch, retrying while the database fails for as long
// as the claims' leases last; past that the deliveries are due again anyway,
// and will be attempted again.
func (d *Deliverer) write(ctx context.Context, batch []result) {
	var rec db.DeliveryRecordParams
	var rel db.DeliveryReleaseParams
	for _, r := range batch {
		if r.release {
			rel.Ids, rel.Leases = append(rel.Ids, r.id), append(rel.Leases, r.lease)
			continue
		}
		metrics.MerchantWebhookAttempts.WithLabelValues(r.kind).Inc()
		metrics.MerchantWebhookAttemptDuration.WithLabelValues(r.kind).Observe(r.duration.Seconds())
		rec.Ids, rec.Leases = append(rec.Ids, r.id), append(rec.Leases, r.lease)
		rec.Outcomes, rec.Reasons = append(rec.Outcomes, r.outcome), append(rec.Reasons, r.reason)
		rec.StatusCodes, rec.Errors = append(rec.StatusCodes, int32(r.statusCode)), append(rec.Errors, r.errText)
		rec.DelaysMs, rec.DurationsMs = append(rec.DelaysMs, r.delay.Milliseconds()), append(rec.DurationsMs, int32(r.duration.Milliseconds()))
	}
	deadline := time.Now().Add(d.cfg.lease())
	b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(100*time.Millisecond), backoff.WithMaxInterval(5*time.Second))
	for {
		err := d.store(ctx, rec, rel)
		if err == nil {
			return
		}
		wait := b.NextBackOff()
		if time.Now().Add(wait).After(deadline) {
			d.log.Error("merchant webhook results not recorded; their deliveries will be attempted again",
				"results", len(batch), "err", err)
			return
		}
		d.log.Warn("record merchant webhook results failed; retrying", "results", len(batch), "err", err, "retry_in", wait)
		time.Sleep(wait)
	}
}

func (d *Deliverer) store(ctx context.Context, rec db.DeliveryRecordParams, rel db.DeliveryReleaseParams) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if len(rec.Ids) > 0 {
		rows, err := db.Q.DeliveryRecord(ctx, d.pool, rec)
		if err != nil {
			return db.Translate(err)
		}
		for _, row := range rows {
			if row.FromStatus != row.ToStatus && row.ToStatus != StatusPending {
				metrics.MerchantWebhookDeliveries.WithLabelValues(row.ToStatus).Inc()
			}
		}
		rec = db.DeliveryRecordParams{} // stored: not again if the release fails
	}
	if len(rel.Ids) > 0 {
		if _, err := db.Q.DeliveryRelease(ctx, d.pool, rel); err != nil {
			return db.Translate(err)
		}
	}
	return nil
}

// listen wakes the dispatcher on the NOTIFYs of the fan-out and of manual
// retries.
func (d *Deliverer) listen(ctx context.Context, wake chan<- struct{}) {
	db.Listener{
		Name: "merchant webhooks", Listen: db.Q.DeliveryListen, Wake: wake, Log: d.log,
		Backoff: func(failures int) time.Duration { return min(time.Duration(failures)*time.Second, 5*time.Second) },
	}.Run(ctx, d.pool)
}

// RefreshGauges keeps the backlog gauges (pending deliveries, the oldest
// one's age) every interval until ctx ends. They describe the table, so every
// pod runs it, whether it delivers or not, and they all report the same.
func RefreshGauges(ctx context.Context, pool *db.Pool, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		qctx, cancel := context.WithTimeout(ctx, opTimeout)
		row, err := db.Q.DeliveryStats(qctx, pool)
		cancel()
		if err == nil {
			metrics.MerchantWebhookPending.Set(float64(row.Pending))
			metrics.MerchantWebhookOldestAge.Set(row.OldestSeconds)
		} else if ctx.Err() == nil {
			log.Warn("merchant webhook backlog stats", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// backoffDelay is the wait before claim number failures+1 after as many
// failed: exponential from a second to a minute, with jitter.
func backoffDelay(failures int) time.Duration {
	d := time.Second << min(failures-1, 6)
	d = min(d, time.Minute)
	return d/2 + rand.N(d/2+1)
}

// jitter is d ±10%, so pods started together do not poll in lockstep.
func jitter(d time.Duration) time.Duration {
	return d - d/10 + rand.N(d/5+1)
}
