package reconcile_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/provider"
	simclient "github.com/acme/paymentsvc/internal/provider/sim"
	"github.com/acme/paymentsvc/internal/reconcile"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

func TestRunResolvesFromTheProvider(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := 10 * time.Minute
	succeeded := b.attempt(chargeSucceeded, testdb.AttemptOpts{Status: attempts.Unknown, Age: old})
	pending := b.attempt(chargeSucceeded, testdb.AttemptOpts{Status: attempts.Pending, Age: old})
	declined := b.attempt(chargeDeclined, testdb.AttemptOpts{Status: attempts.Unknown, Age: old})
	noRecord := b.attempt(noCharge, testdb.AttemptOpts{Status: attempts.Unknown, Age: old})
	// Not touched: too young, not due yet, final.
	young := b.attempt(chargeSucceeded, testdb.AttemptOpts{Status: attempts.Unknown, Age: time.Minute})
	notDue := b.attempt(chargeSucceeded, testdb.AttemptOpts{Status: attempts.Unknown, Age: old, NextCheck: ptr(time.Hour), CheckCount: 2})
	final := b.attempt(chargeSucceeded, testdb.AttemptOpts{Status: attempts.Succeeded, Age: old})
	notDueAt := b.get(notDue).NextCheckAt

	sum, err := b.reconciler(reconcile.Config{MinAge: reconcile.DefaultMinAge}).Run(b.ctx)
	require.NoError(t, err)
	require.Equal(t, reconcile.Summary{Checked: 4, Succeeded: 2, Failed: 2}, sum)

	for _, id := range []string{succeeded, pending} {
		a := b.get(id)
		require.Equal(t, attempts.Succeeded, a.Status, id)
		require.NotNil(t, a.ProviderChargeID)
		require.Equal(t, 201, b.keyResponse(id), "the key replays the truth to a retrying client")
	}
	a := b.get(declined)
	require.Equal(t, attempts.Failed, a.Status)
	require.Equal(t, "card_declined", *a.FailureCode)
	require.Equal(t, 402, b.keyResponse(declined))
	a = b.get(noRecord)
	require.Equal(t, attempts.Failed, a.Status)
	require.Equal(t, attempts.FailureProviderNoRecord, *a.FailureCode)
	require.Equal(t, 402, b.keyResponse(noRecord))

	for _, id := range []string{young, notDue} {
		a := b.get(id)
		require.Equal(t, attempts.Unknown, a.Status, id)
		require.Equal(t, 0, b.keyResponse(id))
	}
	require.Nil(t, b.get(young).NextCheckAt)
	require.Equal(t, 2, b.get(notDue).CheckCount)
	require.Equal(t, notDueAt, b.get(notDue).NextCheckAt, "its next check is left as scheduled")
	hist, err := attempts.History(b.ctx, b.pool, final)
	require.NoError(t, err)
	require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending, attempts.Succeeded}, hist)

	// Every resolution is audited as the reconciler's, along a legal path.
	for _, id := range []string{succeeded, pending, declined, noRecord} {
		hist, err := attempts.History(b.ctx, b.pool, id)
		require.NoError(t, err)
		require.True(t, attempts.LegalPath(hist), "%s: %v", id, hist)
		var source string
		require.NoError(t, b.pool.QueryRow(b.ctx,
			`SELECT source FROM payment_attempt_events WHERE attempt_id = $1 ORDER BY id DESC LIMIT 1`, id).Scan(&source))
		require.Equal(t, string(attempts.SourceReconciler), source)
	}

	// Nothing is due any more: a second run checks nothing.
	sum, err = b.reconciler(reconcile.Config{MinAge: reconcile.DefaultMinAge}).Run(b.ctx)
	require.NoError(t, err)
	require.Equal(t, reconcile.Summary{}, sum)
}

func TestRunLeavesRecentNotFoundUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Not found at the provider, but changed 3m ago while a call of ours may
	// still land for LockTTL + RetryBudget + CallTimeout (5m5s here).
	cfg := testPayments
	cfg.LockTTL = 5 * time.Minute
	id := b.attempt(noCharge, testdb.AttemptOpts{Status: attempts.Unknown, Age: 3 * time.Minute})

	sum, err := b.reconcilerWith(b.pool, b.provider, cfg, reconcile.Config{Lease: 10 * time.Minute}).Run(b.ctx)
	require.NoError(t, err)
	require.Equal(t, reconcile.Summary{Checked: 1, StillUnknown: 1}, sum)
	a := b.get(id)
	require.Equal(t, attempts.Unknown, a.Status)
	require.Equal(t, 1, a.CheckCount)
	require.False(t, a.NeedsReview)
	requireAbout(t, 2*time.Minute, reconcile.DefaultJitter, b.untilNextCheck(id))
	require.Equal(t, 0, b.keyResponse(id))
	require.Equal(t, int64(1), b.lookups.Load())
}

func TestRunSchedulesChecksThenFlagsForReview(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Each was checked checkCount times before; none is found, none is quiet
	// long enough (5s < 30.8s) to be failed.
	recent := testdb.AttemptOpts{Status: attempts.Unknown, Age: 5 * time.Second}
	at := map[int]string{}
	for _, n := range []int{0, 1, 2, 3, 4, 5} {
		o := recent
		o.CheckCount = n
		at[n] = b.attempt(noCharge, o)
	}
	o := recent
	o.CheckCount, o.NeedsReview = 9, true
	flagged := b.attempt(noCharge, o)

	sum, err := b.reconciler(reconcile.Config{MinAge: time.Second}).Run(b.ctx)
	require.NoError(t, err)
	require.Equal(t, reconcile.Summary{Checked: 7, StillUnknown: 7, NeedsReview: 1}, sum)

	for n, id := range at {
		a := b.get(id)
		require.Equal(t, attempts.Unknown, a.Status)
		require.Equal(t, n+1, a.CheckCount)
		wait := reconcile.DefaultSchedule[min(n, 4)]
		requireAbout(t, wait, reconcile.DefaultJitter, b.untilNextCheck(id))
		// The sixth unresolved check has waited out the whole schedule.
		require.Equal(t, n == 5, a.NeedsReview, "checks %d", n+1)
	}
	a := b.get(flagged)
	require.True(t, a.NeedsReview)
	require.Equal(t, 10, a.CheckCount)
	requireAbout(t, 24*time.Hour, reconcile.DefaultJitter, b.untilNextCheck(flagged))
}

func TestRunProviderLookupsFailing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.attempt(chargeSucceeded, testdb.AttemptOpts{Status: attempts.Unknown, Age: 10 * time.Minute})
	b.failLookups.Store(true) // the provider is up (the probe lists), but look-ups fail

	sum, err := b.reconciler(reconcile.Config{}).Run(b.ctx)
	require.NoError(t, err, "the job ran: exit 0")
	require.Equal(t, reconcile.Summary{Checked: 1, StillUnknown: 1, Errors: 1}, sum)
	a := b.get(id)
	require.Equal(t, attempts.Unknown, a.Status, "never guessed")
	require.Equal(t, 1, a.CheckCount)
	requireAbout(t, 2*time.Minute, reconcile.DefaultJitter, b.untilNextCheck(id))
	require.Equal(t, 0, b.keyResponse(id))
	require.Greater(t, b.lookups.Load(), int64(1), "look-ups are retried")
	var locked bool
	require.NoError(t, b.pool.QueryRow(b.ctx,
		`SELECT locked_until IS NOT NULL AND locked_until > now() FROM idempotency_keys WHERE attempt_id = $1`, id).Scan(&locked))
	require.False(t, locked, "the key is released for the client's retry")
}

func TestRunProviderUnreachable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.attempt(chargeSucceeded, testdb.AttemptOpts{Status: attempts.Unknown, Age: 10 * time.Minute})
	created := b.attempt(noCharge, testdb.AttemptOpts{Status: attempts.Created, Age: 10 * time.Minute})
	down := b.newProvider(testkit.RefusedURL(t, "http"), provider.Config{})

	_, err := b.reconcilerWith(b.pool, down, testPayments, reconcile.Config{}).Run(b.ctx)
	require.ErrorIs(t, err, reconcile.ErrProviderUnreachable, "the job could not run: exit 1")
	for _, id := range []string{id, created} {
		a := b.get(id)
		require.False(t, a.Status.Final())
		require.Equal(t, 0, a.CheckCount)
		require.Nil(t, a.NextCheckAt, "nothing scheduled: the next run checks at once")
	}
}

func TestRunBreakerOpenLeavesTheRestDue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []string
	for range 20 {
		ids = append(ids, b.attempt(noCharge, testdb.AttemptOpts{Status: attempts.Unknown, Age: 10 * time.Minute}))
	}
	b.failLookups.Store(true)
	// The first failed look-up opens the breaker: the first check ends
	// unreachable, and no other check starts while the breaker is open.
	p := b.newProvider(b.sim.URL(), provider.Config{
		CallTimeout: 300 * time.Millisecond, RetryBudget: time.Second, BreakerFailures: 1, BreakerCooldown: time.Hour,
	})
	sum, err := b.reconcilerWith(b.pool, p, testPayments, reconcile.Config{Workers: 1}).Run(b.ctx)
	require.NoError(t, err)
	require.Equal(t, reconcile.Summary{Checked: 1, StillUnknown: 1, Errors: 1}, sum)
	scheduled, due := 0, 0
	for _, id := range ids {
		a := b.get(id)
		require.Equal(t, attempts.Unknown, a.Status)
		switch a.CheckCount {
		case 1:
			scheduled++
			requireAbout(t, 2*time.Minute, reconcile.DefaultJitter, b.untilNextCheck(id))
		case 0:
			due++
			require.LessOrEqual(t, b.untilNextCheck(id), time.Duration(0), "handed back due")
		}
	}
	require.Equal(t, sum.Checked, scheduled)
	require.Equal(t, 20-sum.Checked, due)
}

func TestRunAbandonsCreatedWithoutAskingTheProvider(t *testing.T) {
	t.Parallel()
	b := setup(t)
	abandoned := b.attempt(noCharge, testdb.AttemptOpts{Status: attempts.Created, Age: 10 * time.Minute})
	// Its key is still locked by a live request: left alone.
	live := b.attempt(noCharge, testdb.AttemptOpts{Status: attempts.Created, Age: 10 * time.Minute, KeyState: testdb.KeyLocked})
	before := b.sim.Stats(t)

	sum, err := b.reconciler(reconcile.Config{}).Run(b.ctx)
	require.NoError(t, err)
	require.Equal(t, reconcile.Summary{Checked: 2, Failed: 1, StillUnknown: 1}, sum)

	a := b.get(abandoned)
	require.Equal(t, attempts.Failed, a.Status)
	require.Equal(t, attempts.FailureAbandoned, *a.FailureCode)
	require.Equal(t, 402, b.keyResponse(abandoned))
	hist, err := attempts.History(b.ctx, b.pool, abandoned)
	require.NoError(t, err)
	require.Equal(t, []attempts.Status{attempts.Created, attempts.Failed}, hist)

	a = b.get(live)
	require.Equal(t, attempts.Created, a.Status)
	require.Equal(t, 0, a.CheckCount, "a busy key is not a check")
	requireAbout(t, testPayments.LockTTL, reconcile.DefaultJitter, b.untilNextCheck(live))

	require.Equal(t, before.ChargeCalls, b.sim.Stats(t).ChargeCalls)
	require.Zero(t, b.lookups.Load(), "no look-up either")
}

// Two reconcilers started together (overlapping cron runs) over 200 due
// attempts: every attempt is examined by one of them and resolved once.
func TestRunConcurrentRunsResolveEachAttemptOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 200
	ids := testdb.Attempts(t, b.pool, testdb.AttemptsOpts{TenantID: b.tenantID, Prefix: "pay_conc", N: n, Age: 10 * time.Minute})
	// Half of them reached the provider.
	for _, id := range ids[:n/2] {
		b.charge(id, "")
	}

	var (
		runs [2]*reconcile.Reconciler
		sums [2]reconcile.Summary
		errs [2]error
	)
	for i := range runs {
		// Each its own pool and provider client, like two processes.
		pool, err := db.Open(b.ctx, b.db.URL)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		runs[i] = b.reconcilerWith(pool, b.newProvider(b.sim.URL(), provider.Config{}), testPayments, reconcile.Config{BatchSize: 10})
	}
	began := time.Now()
	testkit.Together(2, func(i int) { sums[i], errs[i] = runs[i].Run(context.Background()) })
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	t.Logf("in %s: run A %+v, run B %+v", time.Since(began), sums[0], sums[1])

	var total reconcile.Summary
	for _, s := range sums {
		total.Checked += s.Checked
		total.Succeeded += s.Succeeded
		total.Failed += s.Failed
		total.StillUnknown += s.StillUnknown
		total.Errors += s.Errors
	}
	require.Equal(t, reconcile.Summary{Checked: n, Succeeded: n / 2, Failed: n / 2}, total)
	require.Positive(t, sums[0].Checked, "both runs took a share")
	require.Positive(t, sums[1].Checked, "both runs took a share")

	rows, err := b.pool.Query(b.ctx, `
		SELECT a.id, a.status, count(e.id) FILTER (WHERE e.from_status = 'UNKNOWN')
		FROM payment_attempts a LEFT JOIN payment_attempt_events e ON e.attempt_id = a.id
		GROUP BY a.id, a.status`)
	require.NoError(t, err)
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var (
			id, status  string
			fromUnknown int
		)
		require.NoError(t, rows.Scan(&id, &status, &fromUnknown))
		require.Equal(t, 1, fromUnknown, "%s resolved exactly once", id)
		require.True(t, attempts.Status(status).Final(), id)
		seen++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, n, seen)
}

func TestRunCancelledTouchesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.attempt(chargeSucceeded, testdb.AttemptOpts{Status: attempts.Unknown, Age: 10 * time.Minute})
	ctx, cancel := context.WithCancel(b.ctx)
	cancel()
	_, err := b.reconciler(reconcile.Config{}).Run(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, reconcile.ErrProviderUnreachable)
	require.Equal(t, attempts.Unknown, b.get(id).Status)
	require.Nil(t, b.get(id).NextCheckAt)
}

// A batch starts no check after Lease - LockTTL, so that no check outlives
// the lease; the attempts it did not reach are handed back due at once.
func TestRunHandsBackWhatItCannotCheckInTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []string
	// Twenty checks of up to 400ms each would take 8s, far past the lease.
	const n = 20
	for range n {
		ids = append(ids, b.attempt(noCharge, testdb.AttemptOpts{Status: attempts.Unknown, Age: 10 * time.Minute}))
	}
	b.failLookups.Store(true) // every check spends its whole retry budget
	p := b.newProvider(b.sim.URL(), provider.Config{
		CallTimeout: 100 * time.Millisecond, RetryBudget: 300 * time.Millisecond, BreakerFailures: 1000, BreakerCooldown: time.Second,
	})
	cfg := payments.Config{LockTTL: time.Second, KeyTTL: time.Hour, CallTimeout: 100 * time.Millisecond, RetryBudget: 300 * time.Millisecond, BreakerCooldown: time.Second}
	start := time.Now()
	sum, err := b.reconcilerWith(b.pool, p, cfg, reconcile.Config{Lease: 2 * time.Second, Workers: 1}).Run(b.ctx)
	require.NoError(t, err)
	// The lease is 2s from the claim; no check starts after 1s and one lasts
	// at most 400ms. 1.5s of slack for a loaded machine.
	require.Less(t, time.Since(start), 3500*time.Millisecond, "every check ended inside the lease")
	require.Positive(t, sum.Checked)
	require.Less(t, sum.Checked, n)
	require.Equal(t, reconcile.Summary{Checked: sum.Checked, StillUnknown: sum.Checked, Errors: sum.Checked}, sum)
	handedBack := 0
	for _, id := range ids {
		if a := b.get(id); a.CheckCount == 0 {
			handedBack++
			require.LessOrEqual(t, b.untilNextCheck(id), time.Duration(0), "due at once")
		}
	}
	require.Equal(t, n-sum.Checked, handedBack)
}

// A zero MinAge is no minimum, not the default: an attempt that changed a
// moment ago is checked (cmd/reconciler's --min-age 0s).
func TestRunMinAgeZeroMeansNoMinimum(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.attempt(chargeSucceeded, testdb.AttemptOpts{Status: attempts.Unknown})

	sum, err := b.reconciler(reconcile.Config{MinAge: 0}).Run(b.ctx)
	require.NoError(t, err)
	require.Equal(t, reconcile.Summary{Checked: 1, Succeeded: 1}, sum)
	require.Equal(t, attempts.Succeeded, b.get(id).Status)
}

func TestDefaultConfig(t *testing.T) {
	t.Parallel()
	c := reconcile.DefaultConfig()
	require.NoError(t, c.Validate())
	require.Equal(t, reconcile.DefaultMinAge, c.MinAge)
	require.Equal(t, reconcile.DefaultJitter, c.Jitter)
	require.Equal(t, reconcile.DefaultBatchSize, c.BatchSize)
	require.Equal(t, reconcile.DefaultSchedule, c.Schedule)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, reconcile.Config{}.Validate())
	bad := []reconcile.Config{
		{BatchSize: 1001},
		{BatchSize: -1},
		{Workers: 200},
		{MinAge: -time.Second},
		{Lease: 40 * time.Second},
		{Jitter: 1.5},
		{Schedule: []time.Duration{time.Minute, 0}},
	}
	for _, c := range bad {
		require.Error(t, c.Validate(), "%+v", c)
	}
	// The lease is judged against the payments service's lock TTL.
	b := setup(t)
	timing := testPayments
	timing.LockTTL = 4 * time.Minute
	svc, err := payments.NewService(b.pool, b.provider, timing, nil)
	require.NoError(t, err)
	_, err = reconcile.New(b.pool, svc, reconcile.Config{}) // default lease 5m < 2 × 4m
	require.ErrorContains(t, err, "Lease")
	_, err = reconcile.New(b.pool, svc, reconcile.Config{Lease: 8 * time.Minute})
	require.NoError(t, err)
}

// One provider that hangs does not make the run give up on the others: each
// is probed with its own deadline, at once.
func TestRunProbesEachProviderWithItsOwnDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.attempt(chargeSucceeded, testdb.AttemptOpts{Status: attempts.Unknown, Age: 10 * time.Minute})
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // answers nothing until the caller gives up
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); hang.Close() })
	fast := provider.Config{CallTimeout: 300 * time.Millisecond, RetryBudget: 500 * time.Millisecond, BreakerFailures: 5, BreakerCooldown: 10 * time.Second}
	// The hanging provider comes first, and its client would wait longer
	// than the probe's deadline: probed one after the other under one
	// deadline, it would use all of it and leave the simulator none.
	slow := fast
	slow.CallTimeout, slow.RetryBudget = time.Minute, time.Minute
	hung := provider.NewResilient(simclient.NewHTTPClient("hung", hang.URL, simAPIKey, &http.Client{}), slow, nil)
	sim := b.newProvider(b.sim.URL(), fast)
	timing := testPayments
	timing.CallTimeout, timing.RetryBudget = fast.CallTimeout, fast.RetryBudget
	svc, err := payments.NewRouted(b.pool, []payments.Provider{hung, sim}, timing, nil)
	require.NoError(t, err)
	r, err := reconcile.New(b.pool, svc, reconcile.Config{})
	require.NoError(t, err)

	sum, err := r.Run(b.ctx)
	require.NoError(t, err, "the simulator answered: the job runs")
	require.Equal(t, reconcile.Summary{Checked: 1, Succeeded: 1}, sum)
	require.Equal(t, attempts.Succeeded, b.get(id).Status)
}
