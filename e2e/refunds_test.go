package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/failpoint"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// refundBody is a refund request of amount (0: the whole rest).
func refundBody(amount int64) []byte {
	if amount == 0 {
		return []byte(`{}`)
	}
	return fmt.Appendf(nil, `{"amount":%d}`, amount)
}

// refund posts a refund of payment id with key.
func refund(c *proctest.Client, id, key string, amount int64) (apiclient.Response, error) {
	return c.Do(http.MethodPost, "/v1/payments/"+id+"/refunds", refundBody(amount), map[string]string{
		"Idempotency-Key": key, "Content-Type": "application/json",
	})
}

func mustRefund(t *testing.T, c *proctest.Client, id, key string, amount int64) apiclient.Response {
	t.Helper()
	r, err := refund(c, id, key, amount)
	require.NoError(t, err, "refund %s of %s", key, id)
	return r
}

// paid pays order for amount through c and returns the payment's id.
func paid(t *testing.T, c *proctest.Client, order string, amount int64) string {
	t.Helper()
	r := c.MustPay(t, "pay-"+order, apiclient.Visa(order, amount))
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)
	return r.Str("id")
}

// simRefunds lists every refund the simulator holds.
func simRefunds(t *testing.T, sim *proctest.Sim) []providersim.Refund {
	t.Helper()
	resp, err := http.Get(sim.URL() + "/_sim/refunds")
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct {
		Data []providersim.Refund `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out.Data
}

// refundTrail is refund id's audit trail.
func (s *faultStack) refundTrail(t *testing.T, id string) []lifecycle.Status {
	t.Helper()
	return testdb.Strings[lifecycle.Status](context.Background(), t, s.db.Pool, "SELECT to_status FROM refund_events WHERE refund_id = $1 ORDER BY id", id)
}

func (s *faultStack) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, s.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// testRefundCrash: pod A dies at a refund failpoint; once the lock expires,
// a retry on pod B takes the refund over and finishes it with exactly one
// refund at the provider.
func testRefundCrash(t *testing.T, fp string, statusAfter lifecycle.Status, refundCalls int64) {
	s := newFaultStack(t)
	lockTTL := 5 * time.Second
	podA, a := s.startPod(t, "pod-a", shortTimings(lockTTL, "PAYMENTSVC_FAILPOINT="+fp)...)
	_, b := s.startPod(t, "pod-b", shortTimings(lockTTL)...)
	id := paid(t, b, "o-1", 1000)

	if r, err := refund(a, id, "rf-1", 400); err == nil {
		t.Fatalf("pod A should die at %s, but answered %s", fp, r)
	}
	testkit.Eventually(t, 30*time.Second, "pod A exits", podA.Exited)
	require.Equal(t, 137, podA.ExitCode())
	var status string
	require.NoError(t, s.db.Pool.QueryRow(context.Background(), `SELECT status FROM refunds WHERE payment_id = $1`, id).Scan(&status))
	require.Equal(t, string(statusAfter), status, "the refund as pod A left it")

	r := mustRefund(t, b, id, "rf-1", 400)
	opsProblem(t, r, 409, "idempotency_key_in_use")
	testkit.Eventually(t, time.Minute, "a retry after the lock TTL is served", func() bool {
		r = mustRefund(t, b, id, "rf-1", 400)
		return r.Status != 409
	})
	require.Equal(t, 201, r.Status, "%s", r)
	require.Equal(t, "SUCCEEDED", r.Str("status"))

	refunds := simRefunds(t, s.sim)
	require.Len(t, refunds, 1, "the provider holds exactly one refund")
	require.EqualValues(t, 400, refunds[0].Amount)
	require.Equal(t, r.Str("provider_refund_id"), refunds[0].ID)
	require.Equal(t, refundCalls, s.sim.Stats(t).RefundCalls, "refund calls at the provider")
	require.Equal(t, []lifecycle.Status{lifecycle.Created, lifecycle.Pending, lifecycle.Succeeded}, s.refundTrail(t, r.Str("id")))
	p, err := b.Get("/v1/payments/" + id)
	require.NoError(t, err)
	require.EqualValues(t, 400, p.JSON["amount_refunded"])
	require.EqualValues(t, 600, p.JSON["amount_refundable"])
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM outbox WHERE type = 'PaymentRefunded' AND subject_id = $1`, r.Str("id")))
}

func TestRefundCrashAfterKeyAcquired(t *testing.T) {
	t.Parallel()
	testRefundCrash(t, failpoint.RefundAfterKeyAcquired, lifecycle.Created, 1)
}

func TestRefundCrashAfterProviderCall(t *testing.T) {
	t.Parallel()
	testRefundCrash(t, failpoint.RefundAfterProviderCall, lifecycle.Pending, 2)
}

func TestRefundCrashBeforeCompleteCommit(t *testing.T) {
	t.Parallel()
	testRefundCrash(t, failpoint.RefundBeforeCompleteCommit, lifecycle.Pending, 2)
}

// TestConcurrentRefundsOnTwoPods: 30 partial refunds of one payment, split
// across two pods and released together, never add up to more than the
// payment, and what was reserved is what the provider refunded.
func TestConcurrentRefundsOnTwoPods(t *testing.T) {
	t.Parallel()
	s := newFaultStack(t)
	_, a := s.startPod(t, "pod-a")
	_, b := s.startPod(t, "pod-b")
	id := paid(t, a, "o-1", 10_000)
	const n, each = 30, 700 // 21,000 asked for, 10,000 to give: 14 fit
	statuses := make([]int, n)
	errs := make([]error, n)
	testkit.Together(n, func(i int) {
		c := a
		if i%2 == 1 {
			c = b
		}
		r, err := refund(c, id, fmt.Sprintf("cr-%d", i), each)
		statuses[i], errs[i] = r.Status, err
	})
	count := map[int]int{}
	for i, st := range statuses {
		require.NoError(t, errs[i])
		count[st]++
	}
	require.Equal(t, map[int]int{201: 14, 422: 16}, count)
	reserved := s.count(t, `SELECT COALESCE(sum(amount), 0) FROM refunds WHERE payment_id = $1 AND status <> 'FAILED'`, id)
	require.Equal(t, 14*each, reserved)
	refunded := int64(0)
	for _, re := range simRefunds(t, s.sim) {
		refunded += re.Amount
	}
	require.EqualValues(t, reserved, refunded, "what the provider refunded")
	p, err := a.Get("/v1/payments/" + id)
	require.NoError(t, err)
	require.EqualValues(t, reserved, p.JSON["amount_refunded"])
}

// TestRefundFaultsRetryRefundsOnce: the provider failing (503) or losing its
// answer leaves the refund UNKNOWN (202, not stored); the retry with the same
// key refunds exactly once.
func TestRefundFaultsRetryRefundsOnce(t *testing.T) {
	t.Parallel()
	s := newFaultStack(t)
	_, c := s.startPod(t, "pod", shortTimings(shortLockTTL, "PROVIDER_BREAKER_FAILURES=100")...)
	id := paid(t, c, "o-1", 1000)

	for i, f := range []providersim.Faults{
		{ErrorRate: 1, ErrorStatus: 503, Refunds: true},
		{DropAfterCommit: true, Refunds: true},
	} {
		key := fmt.Sprintf("rf-%d", i)
		s.sim.SetFaults(t, f)
		r := mustRefund(t, c, id, key, 100)
		require.Equal(t, 202, r.Status, "%s", r)
		require.Equal(t, "UNKNOWN", r.Str("status"))
		require.False(t, r.Replayed())
		s.sim.ClearFaults(t)

		r = mustRefund(t, c, id, key, 100)
		require.Equal(t, 201, r.Status, "%s", r)
		require.Equal(t, "SUCCEEDED", r.Str("status"))
		again := mustRefund(t, c, id, key, 100)
		require.True(t, again.Replayed())
		require.JSONEq(t, string(r.Raw), string(again.Raw))
	}
	require.Len(t, simRefunds(t, s.sim), 2, "one refund per key at the provider")
	p, err := c.Get("/v1/payments/" + id)
	require.NoError(t, err)
	require.EqualValues(t, 200, p.JSON["amount_refunded"])
}

// TestRefundsResolvedByWebhookAndReconciler: a refund whose answer was lost
// is resolved by the provider's refund.succeeded webhook; one the provider
// never made fails (provider_no_record) at the reconciler once no call can
// land, and one that never reached the provider (breaker open: 503) is
// failed as abandoned; both release their amount.
func TestRefundsResolvedByWebhookAndReconciler(t *testing.T) {
	t.Parallel()
	s := newFaultStack(t)
	var podURL atomic.Pointer[url.URL]
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := podURL.Load()
		if u == nil {
			http.Error(w, "pod not up yet", http.StatusServiceUnavailable)
			return
		}
		httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
	}))
	t.Cleanup(hooks.Close)
	sim := proctest.StartSim(t, proctest.SimOptions{Env: []string{"SIM_WEBHOOK_URL=" + hooks.URL + "/v1/webhooks/sim"}})
	s.sim = sim
	pod, c := s.startPod(t, "pod", shortTimings(shortLockTTL, "PROVIDER_BREAKER_FAILURES=100")...)
	// Pod B's breaker opens at the first failure and stays open.
	_, tripped := s.startPod(t, "pod-b", shortTimings(shortLockTTL, "PROVIDER_BREAKER_FAILURES=1", "PROVIDER_BREAKER_COOLDOWN=1h")...)
	u, err := url.Parse(pod.URL())
	require.NoError(t, err)
	podURL.Store(u)
	id := paid(t, c, "o-1", 1000)

	// Lost answer: the refund exists at the provider; its webhook resolves ours.
	sim.SetFaults(t, providersim.Faults{DropAfterCommit: true, Refunds: true})
	lost := mustRefund(t, c, id, "rf-lost", 100)
	sim.ClearFaults(t)
	require.Contains(t, []int{201, 202}, lost.Status, "%s", lost) // the webhook may win the race
	testkit.Eventually(t, 30*time.Second, "refund.succeeded resolves the lost refund", func() bool {
		r, err := c.Get("/v1/refunds/" + lost.Str("id"))
		return err == nil && r.Str("status") == "SUCCEEDED"
	})

	// Never made: 503 with nothing created. The same fault opens pod B's
	// breaker with a charge (left UNKNOWN; the reconciler fails it too).
	sim.SetFaults(t, providersim.Faults{ErrorRate: 1, ErrorStatus: 503, Refunds: true})
	never := mustRefund(t, c, id, "rf-never", 200)
	require.Equal(t, 202, never.Status, "%s", never)
	trip := tripped.MustPay(t, "pay-trip", apiclient.Visa("o-trip", 100))
	require.Equal(t, 202, trip.Status, "%s", trip)
	sim.ClearFaults(t)
	// Breaker open: refused before any call; the refund stays CREATED.
	refused := mustRefund(t, tripped, id, "rf-refused", 300)
	opsProblem(t, refused, 503, "provider_unavailable")
	var refusedID, refusedStatus string
	require.NoError(t, s.db.Pool.QueryRow(context.Background(),
		`SELECT r.id, r.status FROM refunds r JOIN idempotency_keys k ON k.refund_id = r.id WHERE k.key = 'rf-refused'`).Scan(&refusedID, &refusedStatus))
	require.Equal(t, "CREATED", refusedStatus)
	p, err := c.Get("/v1/payments/" + id)
	require.NoError(t, err)
	require.EqualValues(t, 400, p.JSON["amount_refundable"], "1000 - 100 - 200 - 300 reserved")

	// The reconciler, once no call of ours can land (5s here).
	b := proctest.Build(t)
	env := []string{"DATABASE_URL=" + s.db.URL, "PROVIDER_URL=" + sim.URL(), "IDEMPOTENCY_LOCK_TTL=" + shortLockTTL.String(),
		"PROVIDER_CALL_TIMEOUT=" + shortCallTimeout, "PROVIDER_RETRY_BUDGET=" + shortRetryBudget}
	// A check before the window has passed would schedule the next one
	// minutes away: wait (by the database clock) until nothing was changed
	// for the window, then run once.
	testkit.Eventually(t, time.Minute, "no call of ours can land any more", func() bool {
		var quiet bool
		err := s.db.Pool.QueryRow(context.Background(),
			`SELECT bool_and(updated_at < now() - interval '5500 milliseconds') FROM (
			     SELECT updated_at FROM refunds WHERE id = $1 UNION ALL SELECT updated_at FROM payment_attempts WHERE id = $2) AS u`,
			never.Str("id"), trip.Str("id")).Scan(&quiet)
		return err == nil && quiet
	})
	stdout, stderr, code, err := proctest.Run(context.Background(), b.Reconciler, []string{"run", "--min-age", "0s"}, env)
	require.NoError(t, err)
	require.Equal(t, 0, code, stderr)
	require.JSONEq(t, `{"checked":1,"succeeded":0,"failed":1,"still_unknown":0,"needs_review":0,"errors":0,
		"refunds":{"checked":2,"succeeded":0,"failed":2,"still_unknown":0},"captures":{"checked":0,"succeeded":0,"failed":0,"still_unknown":0},"voids":{"checked":0,"succeeded":0,"failed":0,"still_unknown":0},"expired":0,"authorized":0}`, stdout)
	r, err := c.Get("/v1/refunds/" + never.Str("id"))
	require.NoError(t, err)
	require.Equal(t, "provider_no_record", r.Str("failure_code"))
	r, err = c.Get("/v1/refunds/" + refusedID)
	require.NoError(t, err)
	require.Equal(t, "FAILED", r.Str("status"))
	require.Equal(t, "abandoned", r.Str("failure_code"))

	p, err = c.Get("/v1/payments/" + id)
	require.NoError(t, err)
	require.EqualValues(t, 100, p.JSON["amount_refunded"])
	require.EqualValues(t, 900, p.JSON["amount_refundable"], "failed refunds released their amounts")
	require.Len(t, simRefunds(t, sim), 1)
	tp, err := c.Get("/v1/payments/" + trip.Str("id"))
	require.NoError(t, err)
	require.Equal(t, "FAILED", tp.Str("status"))
	// Each event once: one PaymentRefunded, two PaymentRefundFailed.
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM outbox WHERE payment_id = $1 AND type = 'PaymentRefunded'`, id))
	require.Equal(t, 2, s.count(t, `SELECT count(*) FROM outbox WHERE payment_id = $1 AND type = 'PaymentRefundFailed'`, id))
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM outbox WHERE payment_id = $1 AND type = 'PaymentFailed'`, trip.Str("id")))
	require.Equal(t, 0, s.count(t, `SELECT count(*) FROM anomalies`))
}

// GET /v1/refunds/{id}?sync=true of a refund whose answer was lost asks the
// provider and answers the refund as it resolved: the same refund, now
// SUCCEEDED, counted once on its payment.
func TestRefundSyncAnswersTheResolvedRefund(t *testing.T) {
	t.Parallel()
	s := newFaultStack(t)
	_, c := s.startPod(t, "pod", shortTimings(shortLockTTL, "PROVIDER_BREAKER_FAILURES=100")...)
	id := paid(t, c, "o-1", 1000)
	s.sim.SetFaults(t, providersim.Faults{DropAfterCommit: true, Refunds: true})
	lost := mustRefund(t, c, id, "rf-sync", 100)
	s.sim.ClearFaults(t)
	require.Equal(t, 202, lost.Status, "%s", lost)
	require.Equal(t, "UNKNOWN", lost.Str("status"))

	synced, err := c.Get("/v1/refunds/" + lost.Str("id") + "?sync=true")
	require.NoError(t, err)
	require.Equal(t, 200, synced.Status, "%s", synced)
	require.Equal(t, lost.Str("id"), synced.Str("id"))
	require.Equal(t, id, synced.Str("payment_id"))
	require.Equal(t, "SUCCEEDED", synced.Str("status"))
	require.EqualValues(t, 100, synced.JSON["amount"])
	require.Len(t, simRefunds(t, s.sim), 1)
	p, err := c.Get("/v1/payments/" + id)
	require.NoError(t, err)
	require.EqualValues(t, 100, p.JSON["amount_refunded"])
}
