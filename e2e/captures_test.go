package e2e

import (
	"context"
	"fmt"
	"net/http"
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

// manualBody is a create body of a manual payment of amount for order.
func manualBody(order string, amount int64) string {
	return fmt.Sprintf(`{"order_id":%q,"amount":%d,"currency":"USD","payment_method":"pm_card_visa","capture_method":"manual"}`, order, amount)
}

// authorizedOn creates a manual payment of amount for order through c and
// returns its id, AUTHORIZED.
func authorizedOn(t *testing.T, c *proctest.Client, order string, amount int64) string {
	t.Helper()
	r := c.MustPay(t, "pay-"+order, manualBody(order, amount))
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)
	require.Equal(t, "AUTHORIZED", r.Str("status"))
	return r.Str("id")
}

// holdOn posts a capture (what "captures") or void ("voids") of payment id
// with key and body through c.
func holdOn(c *proctest.Client, id, what, key, body string) (apiclient.Response, error) {
	return c.Do(http.MethodPost, "/v1/payments/"+id+"/"+what, []byte(body), map[string]string{
		"Idempotency-Key": key, "Content-Type": "application/json",
	})
}

func mustHold(t *testing.T, c *proctest.Client, id, what, key, body string) apiclient.Response {
	t.Helper()
	r, err := holdOn(c, id, what, key, body)
	require.NoError(t, err, "%s %s of %s", what, key, id)
	return r
}

// simCharge is the simulator's charge of payment id (its reference).
func simCharge(t *testing.T, sim *proctest.Sim, id string) providersim.Charge {
	t.Helper()
	var found []providersim.Charge
	for _, ch := range sim.Charges(t) {
		if ch.Reference == id {
			found = append(found, ch)
		}
	}
	require.Len(t, found, 1, "the provider holds one charge of %s", id)
	return found[0]
}

// events counts payment id's outbox events of type typ.
func (s *faultStack) events(t *testing.T, id, typ string) int {
	t.Helper()
	return s.count(t, `SELECT count(*) FROM outbox WHERE payment_id = $1 AND type = $2`, id, typ)
}

// holdCrash is a capture or void failpoint: the operation as the dead pod
// left it, and the provider's calls of that kind in all.
type holdCrash struct {
	failpoint   string
	what        string // captures or voids
	statusAfter lifecycle.Status
	calls       int64
}

// testHoldCrash: pod A dies at a capture or void failpoint; an immediate
// retry on pod B finds the key locked (409); once the lock expires the retry
// takes the operation over and finishes it, with exactly one capture (or
// void) at the provider, each event once.
func testHoldCrash(t *testing.T, c holdCrash) {
	s := newFaultStack(t)
	lockTTL := 5 * time.Second
	podA, a := s.startPod(t, "pod-a", shortTimings(lockTTL, "PAYMENTSVC_FAILPOINT="+c.failpoint)...)
	_, b := s.startPod(t, "pod-b", shortTimings(lockTTL)...)
	id := authorizedOn(t, b, "o-1", 1000)
	body := `{}`
	if c.what == "captures" {
		body = `{"amount":600}`
	}
	if r, err := holdOn(a, id, c.what, "hold-1", body); err == nil {
		t.Fatalf("pod A should die at %s, but answered %s", c.failpoint, r)
	}
	testkit.Eventually(t, 30*time.Second, "pod A exits", podA.Exited)
	require.Equal(t, 137, podA.ExitCode())
	var status string
	require.NoError(t, s.db.Pool.QueryRow(context.Background(), `SELECT status FROM captures WHERE payment_id = $1`, id).Scan(&status))
	require.Equal(t, string(c.statusAfter), status, "as pod A left it")

	r := mustHold(t, b, id, c.what, "hold-1", body)
	opsProblem(t, r, 409, "idempotency_key_in_use")
	testkit.Eventually(t, time.Minute, "a retry after the lock TTL is served", func() bool {
		r = mustHold(t, b, id, c.what, "hold-1", body)
		return r.Status != 409
	})
	require.Equal(t, 201, r.Status, "%s", r)
	require.Equal(t, "SUCCEEDED", r.Str("status"))
	again := mustHold(t, b, id, c.what, "hold-1", body)
	require.True(t, again.Replayed())
	require.JSONEq(t, string(r.Raw), string(again.Raw))

	ch := simCharge(t, s.sim, id)
	st := s.sim.Stats(t)
	p, err := b.Get("/v1/payments/" + id)
	require.NoError(t, err)
	if c.what == "captures" {
		require.Equal(t, providersim.StatusSucceeded, ch.Status)
		require.Equal(t, "psvc_"+r.Str("id"), *ch.CaptureKey, "captured once, under the capture's key")
		require.EqualValues(t, 600, ch.AmountCaptured)
		require.Equal(t, c.calls, st.CaptureCalls)
		require.Equal(t, "SUCCEEDED", p.Str("status"))
		require.EqualValues(t, 600, p.JSON["amount_captured"])
		require.Equal(t, 1, s.events(t, id, "PaymentSucceeded"))
	} else {
		require.Equal(t, providersim.StatusVoided, ch.Status)
		require.Equal(t, "psvc_"+r.Str("id"), *ch.VoidKey)
		require.Equal(t, c.calls, st.VoidCalls)
		require.Equal(t, "CANCELED", p.Str("status"))
		require.Equal(t, 1, s.events(t, id, "PaymentCanceled"))
	}
	require.Equal(t, 1, s.events(t, id, "PaymentAuthorized"))
	require.Equal(t, []lifecycle.Status{lifecycle.Created, lifecycle.Pending, lifecycle.Succeeded},
		testdb.Strings[lifecycle.Status](context.Background(), t, s.db.Pool, `SELECT to_status FROM capture_events WHERE capture_id = $1 ORDER BY id`, r.Str("id")))
}

func TestCaptureCrashAfterKeyAcquired(t *testing.T) {
	t.Parallel()
	testHoldCrash(t, holdCrash{failpoint.CaptureAfterKeyAcquired, "captures", lifecycle.Created, 1})
}

func TestCaptureCrashAfterProviderCall(t *testing.T) {
	t.Parallel()
	testHoldCrash(t, holdCrash{failpoint.CaptureAfterProviderCall, "captures", lifecycle.Pending, 2})
}

func TestCaptureCrashBeforeCompleteCommit(t *testing.T) {
	t.Parallel()
	testHoldCrash(t, holdCrash{failpoint.CaptureBeforeCompleteCommit, "captures", lifecycle.Pending, 2})
}

func TestVoidCrashAfterKeyAcquired(t *testing.T) {
	t.Parallel()
	testHoldCrash(t, holdCrash{failpoint.VoidAfterKeyAcquired, "voids", lifecycle.Created, 1})
}

func TestVoidCrashAfterProviderCall(t *testing.T) {
	t.Parallel()
	testHoldCrash(t, holdCrash{failpoint.VoidAfterProviderCall, "voids", lifecycle.Pending, 2})
}

func TestVoidCrashBeforeCompleteCommit(t *testing.T) {
	t.Parallel()
	testHoldCrash(t, holdCrash{failpoint.VoidBeforeCompleteCommit, "voids", lifecycle.Pending, 2})
}

// TestCaptureRacesVoidOnTwoPods: 20 rounds of a capture on pod A and a void
// on pod B of one payment, released together: exactly one wins each round
// (201; the other 409), and the provider never both captured and voided.
func TestCaptureRacesVoidOnTwoPods(t *testing.T) {
	t.Parallel()
	s := newFaultStack(t)
	_, a := s.startPod(t, "pod-a")
	_, b := s.startPod(t, "pod-b")
	for round := range 20 {
		id := authorizedOn(t, a, fmt.Sprintf("o-race-%d", round), 500)
		var (
			replies [2]apiclient.Response
			errs    [2]error
		)
		testkit.Together(2, func(i int) {
			if i == 0 {
				replies[i], errs[i] = holdOn(a, id, "captures", fmt.Sprintf("cap-%d", round), `{}`)
			} else {
				replies[i], errs[i] = holdOn(b, id, "voids", fmt.Sprintf("void-%d", round), `{}`)
			}
		})
		won := 0
		for i, r := range replies {
			require.NoError(t, errs[i])
			switch r.Status {
			case 201:
				won++
			case 409:
				code := "payment_not_capturable"
				if i == 1 {
					code = "payment_not_voidable"
				}
				opsProblem(t, r, 409, code)
			default:
				t.Fatalf("round %d: %s", round, r)
			}
		}
		require.Equal(t, 1, won, "round %d: exactly one winner", round)
		ch := simCharge(t, s.sim, id)
		require.True(t, (ch.CaptureKey == nil) != (ch.VoidKey == nil), "round %d: captured or voided, never both: %+v", round, ch)
	}
	st := s.sim.Stats(t)
	require.EqualValues(t, 20, st.CaptureCalls+st.VoidCalls, "the loser never reached the provider")
}

// TestLostCaptureAnswers: captures whose answers are lost (202) are
// resolved, without capturing twice, by a retry with the same key and by
// reconciler run (TestLostAnswersResolvedBySync: by GET ?sync=true).
func TestLostCaptureAnswers(t *testing.T) {
	t.Parallel()
	s := newFaultStack(t)
	_, c := s.startPod(t, "pod", shortTimings(shortLockTTL, "PROVIDER_BREAKER_FAILURES=100")...)
	ids := []string{authorizedOn(t, c, "o-retry", 500), authorizedOn(t, c, "o-reconciler", 500)}
	s.sim.SetFaults(t, providersim.Faults{DropAfterCommit: true, Captures: true})
	lost := make([]apiclient.Response, len(ids))
	for i, id := range ids {
		lost[i] = mustHold(t, c, id, "captures", fmt.Sprintf("cap-%d", i), `{"amount":400}`)
		require.Equal(t, 202, lost[i].Status, "%s", lost[i])
		require.Equal(t, "UNKNOWN", lost[i].Str("status"))
	}
	s.sim.ClearFaults(t)

	// By a retry with the key.
	r := mustHold(t, c, ids[0], "captures", "cap-0", `{"amount":400}`)
	require.Equal(t, 201, r.Status, "%s", r)
	require.Equal(t, lost[0].Str("id"), r.Str("id"))
	// By the reconciler (found under the derived key: no window to wait).
	b := proctest.Build(t)
	env := []string{"DATABASE_URL=" + s.db.URL, "PROVIDER_URL=" + s.sim.URL(), "IDEMPOTENCY_LOCK_TTL=" + shortLockTTL.String(),
		"PROVIDER_CALL_TIMEOUT=" + shortCallTimeout, "PROVIDER_RETRY_BUDGET=" + shortRetryBudget}
	stdout, stderr, code, err := proctest.Run(context.Background(), b.Reconciler, []string{"run", "--min-age", "0s"}, env)
	require.NoError(t, err)
	require.Equal(t, 0, code, stderr)
	require.JSONEq(t, `{"checked":0,"succeeded":0,"failed":0,"still_unknown":0,"needs_review":0,"errors":0,
		"refunds":{"checked":0,"succeeded":0,"failed":0,"still_unknown":0},"captures":{"checked":1,"succeeded":1,"failed":0,"still_unknown":0},
		"voids":{"checked":0,"succeeded":0,"failed":0,"still_unknown":0},"expired":0,"authorized":0}`, stdout)
	got, err := c.Get("/v1/captures/" + lost[1].Str("id"))
	require.NoError(t, err)
	require.Equal(t, "SUCCEEDED", got.Str("status"))

	for i, id := range ids {
		ch := simCharge(t, s.sim, id)
		require.EqualValues(t, 400, ch.AmountCaptured, "captured once: %s", id)
		require.Equal(t, "psvc_"+lost[i].Str("id"), *ch.CaptureKey)
		p, err := c.Get("/v1/payments/" + id)
		require.NoError(t, err)
		require.Equal(t, "SUCCEEDED", p.Str("status"))
		require.EqualValues(t, 400, p.JSON["amount_captured"])
		require.Equal(t, 1, s.events(t, id, "PaymentSucceeded"))
		again := mustHold(t, c, id, "captures", fmt.Sprintf("cap-%d", i), `{"amount":400}`)
		require.True(t, again.Status == 201 && again.Replayed(), "%s", again)
	}
}

// TestLostAnswersResolvedBySync: a capture and a void whose answers are
// lost are resolved by GET /v1/captures/{id}?sync=true and
// GET /v1/voids/{id}?sync=true alone.
func TestLostAnswersResolvedBySync(t *testing.T) {
	t.Parallel()
	s := newFaultStack(t)
	_, c := s.startPod(t, "pod", shortTimings(shortLockTTL, "PROVIDER_BREAKER_FAILURES=100")...)
	captured, voided := authorizedOn(t, c, "o-cap", 500), authorizedOn(t, c, "o-void", 500)
	s.sim.SetFaults(t, providersim.Faults{DropAfterCommit: true, Captures: true})
	lostCapture := mustHold(t, c, captured, "captures", "cap-1", `{}`)
	require.Equal(t, 202, lostCapture.Status, "%s", lostCapture)
	lostVoid := mustHold(t, c, voided, "voids", "void-1", `{"reason":"abandoned"}`)
	require.Equal(t, 202, lostVoid.Status, "%s", lostVoid)
	s.sim.ClearFaults(t)

	synced, err := c.Get("/v1/captures/" + lostCapture.Str("id") + "?sync=true")
	require.NoError(t, err)
	require.Equal(t, "SUCCEEDED", synced.Str("status"))
	p, err := c.Get("/v1/payments/" + captured)
	require.NoError(t, err)
	require.Equal(t, "SUCCEEDED", p.Str("status"))
	require.EqualValues(t, 500, p.JSON["amount_captured"])

	synced, err = c.Get("/v1/voids/" + lostVoid.Str("id") + "?sync=true")
	require.NoError(t, err)
	require.Equal(t, "SUCCEEDED", synced.Str("status"))
	p, err = c.Get("/v1/payments/" + voided)
	require.NoError(t, err)
	require.Equal(t, "CANCELED", p.Str("status"))
	require.Equal(t, "abandoned", p.Str("canceled_reason"))
	require.Equal(t, 1, s.events(t, voided, "PaymentCanceled"))
	require.Equal(t, 1, s.events(t, captured, "PaymentSucceeded"))
	require.EqualValues(t, 500, simCharge(t, s.sim, captured).AmountCaptured)
}

// TestReconcilerExpiresAuthorizations: once capture_before passes (the
// simulator's authorizations last 2s here), reconciler run, whatever
// --min-age, makes the payment CANCELED (expired), with its event once.
func TestReconcilerExpiresAuthorizations(t *testing.T) {
	t.Parallel()
	s := newFaultStack(t)
	s.sim = proctest.StartSim(t, proctest.SimOptions{Env: []string{"SIM_AUTH_TTL=2s"}})
	_, c := s.startPod(t, "pod")
	id := authorizedOn(t, c, "o-exp", 500)
	testkit.Eventually(t, time.Minute, "capture_before passed", func() bool {
		return s.count(t, `SELECT count(*) FROM payment_attempts WHERE id = $1 AND capture_before < now()`, id) == 1
	})
	b := proctest.Build(t)
	stdout, stderr, code, err := proctest.Run(context.Background(), b.Reconciler, []string{"run"},
		[]string{"DATABASE_URL=" + s.db.URL, "PROVIDER_URL=" + s.sim.URL()})
	require.NoError(t, err)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `"expired":1`)
	p, err := c.Get("/v1/payments/" + id)
	require.NoError(t, err)
	require.Equal(t, "CANCELED", p.Str("status"))
	require.Equal(t, "expired", p.Str("canceled_reason"))
	require.Nil(t, p.JSON["capture_before"])
	require.Equal(t, 1, s.events(t, id, "PaymentCanceled"))
	// The order is free again.
	require.Equal(t, 201, c.MustPay(t, "pay-again", apiclient.Visa("o-exp", 500)).Status)
}

// TestSettleVoidsAnOrphanAuthorization: an authorization at the provider
// that no payment of ours stands for is voided by reconciler settle under a
// key derived from the charge, never refunded; settling again voids nothing.
func TestSettleVoidsAnOrphanAuthorization(t *testing.T) {
	t.Parallel()
	s := newFaultStack(t)
	_, c := s.startPod(t, "pod")
	ours := authorizedOn(t, c, "o-held", 500)
	orphan := proctest.NewClient(s.sim.URL(), "sk_sim")
	r, err := orphan.Do(http.MethodPost, "/v1/charges", []byte(`{"amount":700,"currency":"USD","payment_method":"pm_card_visa","reference":"pay_elsewhere","capture":false}`),
		map[string]string{"Content-Type": "application/json", "Idempotency-Key": "someone-elses-key"})
	require.NoError(t, err)
	require.Equal(t, 201, r.Status, "%s", r)
	day := time.Unix(int64(r.JSON["created"].(float64)), 0).UTC().Format("2006-01-02")
	if time.Unix(simCharge(t, s.sim, ours).Created, 0).UTC().Format("2006-01-02") != day {
		t.Skip("the charges straddle midnight UTC")
	}

	b := proctest.Build(t)
	env := []string{"DATABASE_URL=" + s.db.URL, "PROVIDER_URL=" + s.sim.URL()}
	for range 2 {
		stdout, stderr, code, err := proctest.Run(context.Background(), b.Reconciler, []string{"settle", "--day", day}, env)
		require.NoError(t, err)
		require.Equal(t, 0, code, stderr)
		require.JSONEq(t, fmt.Sprintf(`{"day":%q,"provider_charges":2,"matched":1,"orphans_refunded":0,"orphans_voided":1,"amount_mismatches":0,"missing_at_provider":0,"foreign":0}`, day), stdout)
	}
	ch := simCharge(t, s.sim, "pay_elsewhere")
	require.Equal(t, providersim.StatusVoided, ch.Status)
	require.Equal(t, "void_"+ch.ID, *ch.VoidKey)
	st := s.sim.Stats(t)
	require.EqualValues(t, 0, st.Refunds, "an authorization moved no money: never refunded")
	require.EqualValues(t, 1, st.VoidCalls, "one void, however often settled")
	require.Equal(t, providersim.StatusAuthorized, simCharge(t, s.sim, ours).Status, "ours, held, left alone")
}
