package outbox_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// insertSilently seeds n SUCCEEDED payments of b's tenant, each with a
// PaymentSucceeded outbox row inserted without any NOTIFY, as the create
// path's commit does (OutboxInsertMoved), and returns the event ids.
func (b *bundle) insertSilently(t testing.TB, n int) []string {
	t.Helper()
	payments := testdb.Attempts(t, b.db.Pool, testdb.AttemptsOpts{
		TenantID: b.tenantID, Prefix: testkit.RandomID("pay_") + "_", N: n,
		Statuses: []attempts.Status{attempts.Succeeded},
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ids := make([]string, n)
	for i, p := range payments {
		ids[i] = testkit.RandomID("evt_")
		require.NoError(t, db.Q.OutboxInsert(ctx, b.db.Pool, db.OutboxInsertParams{
			ID: ids[i], Type: outbox.TypePaymentSucceeded, Subject: outbox.Subject(outbox.TypePaymentSucceeded),
			SubjectID: p, PaymentID: p, Payload: json.RawMessage(`{"id":"` + p + `"}`),
		}))
	}
	return ids
}

// TestRelayWakesOnItsWakeup sets a poll interval no test waits for and
// inserts rows with no NOTIFY, so only the process's own Wakeup can get
// them published. Three rounds, because one wake-up may be left over from
// startup.
func TestRelayWakesOnItsWakeup(t *testing.T) {
	t.Parallel()
	b := setup(t, testkit.NATSURL())
	cfg := b.cfg
	cfg.PollInterval = time.Hour
	cfg.Wakeup = outbox.NewWakeup()
	ran := make(chan struct{}, 1)
	cfg = cfg.WithHooks(outbox.Hooks{AfterBatch: func(outbox.BatchResult) { db.Signal(ran) }})
	runRelay(t, newRelay(t, b.db.Pool, cfg))
	waitRan(t, ran)

	var ids []string
	for range 3 {
		round := b.insertSilently(t, 2)
		cfg.Wakeup.Signal()
		waitDrained(t, b.db.Pool, 10*time.Second)
		ids = append(ids, round...)
	}
	requireEachOnce(t, b.js, cfg.Stream, ids)
}

// TestNotifyWakesTheRelaysOfOtherPods is a pod that runs no relay
// (OUTBOX_RELAY=off): Notify turns its Wakeup's signals into NOTIFY outbox,
// which wakes a relay elsewhere whose poll no test waits for.
func TestNotifyWakesTheRelaysOfOtherPods(t *testing.T) {
	t.Parallel()
	b := setup(t, testkit.NATSURL())
	cfg := b.cfg
	cfg.PollInterval = time.Hour
	ran := make(chan struct{}, 1)
	cfg = cfg.WithHooks(outbox.Hooks{AfterBatch: func(outbox.BatchResult) { db.Signal(ran) }})
	runRelay(t, newRelay(t, b.db.Pool, cfg)) // the other pod's relay: no Wakeup of ours
	waitRan(t, ran)
	// The relay's LISTEN session must be up, or the NOTIFY reaches nobody.
	listenerPID(t, b.db.Pool, 0)

	w := outbox.NewWakeup()
	testkit.Background(t, func(ctx context.Context) error {
		outbox.Notify(ctx, b.db.Pool, w, time.Millisecond, testLogger(t))
		return nil
	})
	var ids []string
	for range 3 {
		round := b.insertSilently(t, 2)
		w.Signal()
		waitDrained(t, b.db.Pool, 10*time.Second)
		ids = append(ids, round...)
	}
	requireEachOnce(t, b.js, cfg.Stream, ids)
}

// waitRan waits for the relay's first batch: it has started (and its
// leftover startup wake-up may be spent).
func waitRan(t testing.TB, ran <-chan struct{}) {
	t.Helper()
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("the relay ran no batch within 30s")
	}
}

// TestRelayGathersTheWakeUpsOfAnInterval: wake-ups that come within
// WakeInterval of the last batch's start make one batch, not one each, so
// that under load the rows of many commits share one claim, mark and commit.
func TestRelayGathersTheWakeUpsOfAnInterval(t *testing.T) {
	t.Parallel()
	b := setup(t, testkit.NATSURL())
	cfg := b.cfg
	cfg.PollInterval = time.Hour
	cfg.WakeInterval = 5 * time.Second // far longer than three inserts take
	cfg.Wakeup = outbox.NewWakeup()
	batches := make(chan outbox.BatchResult, 100)
	cfg = cfg.WithHooks(outbox.Hooks{AfterBatch: func(r outbox.BatchResult) { batches <- r }})
	runRelay(t, newRelay(t, b.db.Pool, cfg))
	next := func() outbox.BatchResult {
		t.Helper()
		select {
		case r := <-batches:
			return r
		case <-time.After(30 * time.Second):
			t.Fatal("no batch within 30s")
			return outbox.BatchResult{}
		}
	}
	// Wait for a batch that publishes a row of ours: the interval runs
	// from its start.
	next() // the startup batch
	ids := b.insertSilently(t, 1)
	cfg.Wakeup.Signal()
	for next().Published == 0 {
	}
	for range 3 {
		ids = append(ids, b.insertSilently(t, 1)...)
		cfg.Wakeup.Signal()
	}
	require.Equal(t, 3, next().Published, "the three wake-ups of the interval made one batch")
	waitDrained(t, b.db.Pool, 10*time.Second)
	requireEachOnce(t, b.js, cfg.Stream, ids)
}
