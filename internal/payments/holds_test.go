package payments_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/captures"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/provider"
	simclient "github.com/acme/paymentsvc/internal/provider/sim"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// authorized creates a manual payment of 500 for order and returns it,
// AUTHORIZED.
func (b *bundle) authorized(order string) attempts.Payment {
	b.t.Helper()
	in := b.input("key-"+order, order)
	in.CaptureMethod = attempts.CaptureManual
	r, err := b.svc.Create(b.ctx, in)
	require.NoError(b.t, err)
	require.Equal(b.t, http.StatusCreated, r.Code, "%s", r.Body)
	p := payment(b.t, r)
	require.Equal(b.t, attempts.Authorized, p.Status)
	return p
}

// fp is a fingerprint of a request named what (each request of a test its own).
func fp(what string) []byte {
	f, err := idempotency.Fingerprint(http.MethodPost, "/"+what, []byte(`{}`))
	if err != nil {
		panic(err)
	}
	return f
}

func (b *bundle) capture(svc *payments.Service, paymentID, key string, amount int64) (payments.Reply, error) {
	in := payments.CaptureInput{OperationRequest: payments.OperationRequest{
		TenantID: b.tenantID, PaymentID: paymentID, IdempotencyKey: key, Fingerprint: fp(paymentID + "/captures" + fmt.Sprint(amount)),
	}}
	if amount > 0 {
		in.Amount = &amount
	}
	return svc.Capture(b.ctx, in)
}

func (b *bundle) void(svc *payments.Service, paymentID, key string) (payments.Reply, error) {
	reason := "requested_by_customer"
	return svc.Void(b.ctx, payments.VoidInput{OperationRequest: payments.OperationRequest{
		TenantID: b.tenantID, PaymentID: paymentID, IdempotencyKey: key, Fingerprint: fp(paymentID + "/voids"),
	}, Reason: &reason})
}

// op decodes a capture's or void's answer.
type op struct {
	ID          string           `json:"id"`
	PaymentID   string           `json:"payment_id"`
	Amount      int64            `json:"amount"`
	Status      lifecycle.Status `json:"status"`
	Reason      *string          `json:"reason"`
	FailureCode *string          `json:"failure_code"`
}

func decodeOp(t *testing.T, r payments.Reply) op {
	t.Helper()
	var o op
	require.NoError(t, json.Unmarshal(r.Body, &o), "%s", r.Body)
	return o
}

func (b *bundle) events(paymentID, typ string) int {
	b.t.Helper()
	return b.count(`SELECT count(*) FROM outbox WHERE payment_id = $1 AND type = $2`, paymentID, typ)
}

// TestManualPaymentIsAuthorized: a manual create answers 201 AUTHORIZED,
// stored on its key (replayed as it is even after a capture), with its
// event, whose answer holds the amount until capture_before.
func TestManualPaymentIsAuthorized(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.input("key-m", "order-m")
	in.CaptureMethod = attempts.CaptureManual
	r, err := b.svc.Create(b.ctx, in)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Code)
	p := payment(t, r)
	require.Equal(t, attempts.Authorized, p.Status)
	require.Equal(t, "manual", p.CaptureMethod)
	require.EqualValues(t, 500, p.AmountCapturable)
	require.Zero(t, p.AmountCaptured)
	require.Zero(t, p.AmountRefundable)
	require.NotNil(t, p.CaptureBefore)
	require.WithinDuration(t, time.Now().Add(providersim.DefaultAuthTTL), *p.CaptureBefore, time.Minute)
	require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending, attempts.Authorized}, b.history(p.ID))
	require.Equal(t, "provider sim authorized", b.reasons(p.ID)[2])
	require.Equal(t, 1, b.events(p.ID, attempts.EventPaymentAuthorized))
	k := b.key(in.IdempotencyKey)
	require.EqualValues(t, http.StatusCreated, *k.code)
	require.Equal(t, string(r.Body), string(k.body), "the stored answer is the answer")

	c, err := b.capture(b.svc, p.ID, "cap-1", 0)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, c.Code, "%s", c.Body)

	again, err := b.svc.Create(b.ctx, in)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, string(r.Body), string(again.Body), "a replay answers what was stored, even after a capture")
	require.Equal(t, http.StatusCreated, again.Code)

	auto := b.input("key-m", "order-m") // the same key without capture_method: another request
	auto.Fingerprint = fp("automatic")
	_, err = b.svc.Create(b.ctx, auto)
	requireAppErr(t, err, apperr.IdempotencyKeyReused)
}

// TestCaptureOfPart: a partial capture succeeds once, makes the payment
// SUCCEEDED with what it captured (the rest released), refundable up to
// that; its key replays and refuses another body; no second capture or
// void is taken.
func TestCaptureOfPart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.authorized("order-c")
	r, err := b.capture(b.svc, p.ID, "cap-1", 300)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	c := decodeOp(t, r)
	require.Equal(t, lifecycle.Succeeded, c.Status)
	require.EqualValues(t, 300, c.Amount)
	require.Regexp(t, `^cap_[0-9a-f]{24}$`, c.ID)

	paid := b.get(p.ID)
	require.Equal(t, attempts.Succeeded, paid.Status)
	require.EqualValues(t, 300, paid.AmountCaptured)
	require.EqualValues(t, 300, paid.Public().AmountRefundable)
	require.Zero(t, paid.Public().AmountCapturable)
	require.Nil(t, paid.Public().CaptureBefore)
	require.Equal(t, 1, b.events(p.ID, attempts.EventPaymentSucceeded))
	var event attempts.Payment
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT payload FROM outbox WHERE payment_id = $1 AND type = 'PaymentSucceeded'`, p.ID).Scan(&event))
	require.EqualValues(t, 300, event.AmountCaptured, "PaymentSucceeded carries amount_captured")
	ch := b.sim.Charge(t, *paid.ProviderChargeID)
	require.EqualValues(t, 300, ch.AmountCaptured)
	require.Equal(t, "psvc_"+c.ID, *ch.CaptureKey)
	trail, err := captures.History(b.ctx, b.pool, c.ID)
	require.NoError(t, err)
	require.Equal(t, []lifecycle.Status{lifecycle.Created, lifecycle.Pending, lifecycle.Succeeded}, trail)
	require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending, attempts.Authorized, attempts.Succeeded}, b.history(p.ID))

	again, err := b.capture(b.svc, p.ID, "cap-1", 300)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, string(r.Body), string(again.Body))
	_, err = b.capture(b.svc, p.ID, "cap-1", 200)
	requireAppErr(t, err, apperr.IdempotencyKeyReused)
	_, err = b.capture(b.svc, p.ID, "cap-2", 100)
	requireAppErr(t, err, apperr.PaymentNotCapturable)
	_, err = b.void(b.svc, p.ID, "void-1")
	requireAppErr(t, err, apperr.PaymentNotVoidable)
	require.EqualValues(t, 1, b.sim.Stats(t).CaptureCalls, "refusals and replays call nothing")
}

// TestVoidCancelsAndFreesTheOrder: a void makes the payment CANCELED with
// its reason and its event once; the order may be paid again.
func TestVoidCancelsAndFreesTheOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.authorized("order-v")
	r, err := b.void(b.svc, p.ID, "void-1")
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	v := decodeOp(t, r)
	require.Equal(t, lifecycle.Succeeded, v.Status)
	require.Equal(t, "requested_by_customer", *v.Reason)
	require.Regexp(t, `^void_[0-9a-f]{24}$`, v.ID)
	canceled := b.get(p.ID).Public()
	require.Equal(t, attempts.Canceled, canceled.Status)
	require.Equal(t, "requested_by_customer", *canceled.CanceledReason)
	require.Zero(t, canceled.AmountCapturable)
	require.Equal(t, 1, b.events(p.ID, attempts.EventPaymentCanceled))
	require.Equal(t, providersim.StatusVoided, b.sim.Charge(t, *canceled.ProviderChargeID).Status)

	_, err = b.capture(b.svc, p.ID, "cap-1", 0)
	requireAppErr(t, err, apperr.PaymentNotCapturable)
	again, err := b.svc.Create(b.ctx, b.input("key-again", "order-v"))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, again.Code, "a CANCELED payment frees its order")
}

func TestCaptureRefusedBeforeTheProvider(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.authorized("order-r")
	_, err := b.capture(b.svc, p.ID, "cap-big", 501)
	e := requireAppErr(t, err, apperr.CaptureExceeds)
	require.Contains(t, e.Detail, "500")
	_, err = b.capture(b.svc, "pay_nope", "cap-x", 0)
	requireAppErr(t, err, apperr.PaymentNotFound)
	auto, err := b.svc.Create(b.ctx, b.input("key-auto", "order-auto"))
	require.NoError(t, err)
	_, err = b.capture(b.svc, auto.PaymentID, "cap-auto", 0)
	requireAppErr(t, err, apperr.PaymentNotCapturable)
	_, err = b.void(b.svc, auto.PaymentID, "void-auto")
	requireAppErr(t, err, apperr.PaymentNotVoidable)
	require.Zero(t, b.count(`SELECT count(*) FROM captures`), "a refusal keeps nothing")
	require.Zero(t, b.count(`SELECT count(*) FROM idempotency_keys WHERE capture_id IS NOT NULL`))
	// The refused key is free: the same key captures once the cause is gone.
	r, err := b.capture(b.svc, p.ID, "cap-big", 500)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Code)
}

// TestCaptureRacesVoid: 20 rounds of a capture and a void of one payment
// on two pods, released together: exactly one wins each round, and the
// provider never both captured and voided.
func TestCaptureRacesVoid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other, _ := b.otherPod()
	for round := range 20 {
		p := b.authorized(fmt.Sprintf("order-race-%d", round))
		var (
			replies [2]payments.Reply
			errs    [2]error
		)
		testkit.Together(2, func(i int) {
			if i == 0 {
				replies[i], errs[i] = b.capture(b.svc, p.ID, fmt.Sprintf("cap-%d", round), 0)
			} else {
				replies[i], errs[i] = b.void(other, p.ID, fmt.Sprintf("void-%d", round))
			}
		})
		won := 0
		for i := range 2 {
			if errs[i] == nil {
				require.Equal(t, http.StatusCreated, replies[i].Code, "%s", replies[i].Body)
				won++
				continue
			}
			code := apperr.PaymentNotCapturable
			if i == 1 {
				code = apperr.PaymentNotVoidable
			}
			requireAppErr(t, errs[i], code)
		}
		require.Equal(t, 1, won, "round %d", round)
		ch := b.sim.Charge(t, *b.get(p.ID).ProviderChargeID)
		require.True(t, (ch.CaptureKey == nil) != (ch.VoidKey == nil), "round %d: captured or voided, never both", round)
		require.True(t, b.get(p.ID).Status.Final())
	}
}

// TestTwoCapturesWithDifferentKeys: of two captures at once, one captures.
func TestTwoCapturesWithDifferentKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other, _ := b.otherPod()
	p := b.authorized("order-2c")
	var errs [2]error
	testkit.Together(2, func(i int) {
		svc := b.svc
		if i == 1 {
			svc = other
		}
		_, errs[i] = b.capture(svc, p.ID, fmt.Sprintf("cap-%d", i), int64(100+i))
	})
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else {
			requireAppErr(t, err, apperr.PaymentNotCapturable)
		}
	}
	require.Equal(t, 1, ok)
	require.EqualValues(t, 1, b.sim.Stats(t).CaptureCalls)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM captures WHERE payment_id = $1`, p.ID))
}

// TestLostCaptureAnswer: a capture whose answer is lost is 202 UNKNOWN (not
// stored); the payment stays AUTHORIZED and takes no void; the retry with
// the key captures exactly once.
func TestLostCaptureAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.authorized("order-lost")
	b.sim.SetFaults(t, providersim.Faults{DropAfterCommit: true, Captures: true})
	r, err := b.capture(b.svc, p.ID, "cap-1", 0)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, r.Code, "%s", r.Body)
	require.Equal(t, lifecycle.Unknown, decodeOp(t, r).Status)
	require.Nil(t, b.key("cap-1").code, "a 202 is not stored")
	require.Equal(t, attempts.Authorized, b.get(p.ID).Status)
	_, err = b.void(b.svc, p.ID, "void-1")
	requireAppErr(t, err, apperr.PaymentNotVoidable)

	b.sim.ClearFaults(t)
	r, err = b.capture(b.svc, p.ID, "cap-1", 0)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	require.Equal(t, attempts.Succeeded, b.get(p.ID).Status)
	require.EqualValues(t, 500, b.get(p.ID).AmountCaptured)
	require.Equal(t, 1, b.events(p.ID, attempts.EventPaymentSucceeded))
	ch := b.sim.Charge(t, *b.get(p.ID).ProviderChargeID)
	require.EqualValues(t, 500, ch.AmountCaptured, "captured once")
}

// TestSyncResolvesAnUnknownCapture: ?sync=true's Sync learns the capture
// the provider made under the lost call's key.
func TestSyncResolvesAnUnknownCapture(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.authorized("order-sync")
	b.sim.SetFaults(t, providersim.Faults{DropAfterCommit: true, Captures: true})
	r, err := b.capture(b.svc, p.ID, "cap-1", 200)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, r.Code)
	b.sim.ClearFaults(t)
	c, outcome, err := b.svc.SyncCapture(b.ctx, decodeOp(t, r).ID, payments.SyncOptions{Source: attempts.SourceAPI})
	require.NoError(t, err)
	require.Equal(t, payments.Resolved, outcome)
	require.Equal(t, lifecycle.Succeeded, c.Status)
	require.Equal(t, attempts.Succeeded, b.get(p.ID).Status)
	require.EqualValues(t, 200, b.get(p.ID).AmountCaptured)
	again, err := b.capture(b.svc, p.ID, "cap-1", 200)
	require.NoError(t, err)
	require.True(t, again.Replayed, "the sync stored the key's answer")
	require.Equal(t, http.StatusCreated, again.Code)
}

// TestRefusedCaptureOfAnExpiredAuthorization: the provider refuses
// authorization_expired: the capture is FAILED (402) and the payment
// CANCELED (expired).
func TestRefusedCaptureOfAnExpiredAuthorization(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.authorized("order-exp")
	b.sim.Expire(t, *p.ProviderChargeID)
	r, err := b.capture(b.svc, p.ID, "cap-1", 0)
	require.NoError(t, err)
	require.Equal(t, http.StatusPaymentRequired, r.Code, "%s", r.Body)
	c := decodeOp(t, r)
	require.Equal(t, lifecycle.Failed, c.Status)
	require.Equal(t, provider.CodeAuthorizationExpired, *c.FailureCode)
	after := b.get(p.ID)
	require.Equal(t, attempts.Canceled, after.Status)
	require.Equal(t, lifecycle.CanceledExpired, *after.CanceledReason)
	require.Equal(t, 1, b.events(p.ID, attempts.EventPaymentCanceled))
	require.Zero(t, b.count(`SELECT count(*) FROM anomalies WHERE attempt_id = $1`, p.ID), "an expiry is no anomaly")
}

// TestRefusedCaptureOfAChargeCapturedElsewhere: money that moved never
// looks held: a capture refused because the provider captured it otherwise
// makes the payment SUCCEEDED with the provider's amount, and records it.
func TestRefusedCaptureOfAChargeCapturedElsewhere(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.authorized("order-else")
	direct := b.sim.Provider(simAPIKey, providerConfig).CaptureCharge(b.ctx, provider.CaptureRequest{
		ChargeID: *p.ProviderChargeID, Amount: 400, IdempotencyKey: "dashboard-capture",
	})
	require.Equal(t, provider.Succeeded, direct.Outcome)
	r, err := b.void(b.svc, p.ID, "void-1")
	require.NoError(t, err)
	require.Equal(t, http.StatusPaymentRequired, r.Code, "%s", r.Body)
	require.Equal(t, provider.CodeChargeAlreadyCaptured, *decodeOp(t, r).FailureCode)
	after := b.get(p.ID)
	require.Equal(t, attempts.Succeeded, after.Status)
	require.EqualValues(t, 400, after.AmountCaptured)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM anomalies WHERE attempt_id = $1 AND kind = 'unexpected_capture'`, p.ID))
	require.Equal(t, 1, b.events(p.ID, attempts.EventPaymentSucceeded))
}

// TestCheckHeld: asking the provider about an AUTHORIZED payment applies
// an expiry, a capture made at the provider, and passes over a payment a
// capture of ours holds.
func TestCheckHeld(t *testing.T) {
	t.Parallel()
	b := setup(t)
	opt := payments.SyncOptions{Source: attempts.SourceReconciler}

	held := b.authorized("order-held")
	a, outcome, err := b.svc.CheckHeld(b.ctx, held.ID, opt)
	require.NoError(t, err)
	require.Equal(t, payments.StillUnknown, outcome, "still held")
	require.Equal(t, attempts.Authorized, a.Status)

	expired := b.authorized("order-expired")
	b.sim.Expire(t, *expired.ProviderChargeID)
	a, outcome, err = b.svc.CheckHeld(b.ctx, expired.ID, opt)
	require.NoError(t, err)
	require.Equal(t, payments.Resolved, outcome)
	require.Equal(t, attempts.Canceled, a.Status)
	require.Equal(t, lifecycle.CanceledExpired, *a.CanceledReason)

	elsewhere := b.authorized("order-elsewhere")
	r := b.sim.Provider(simAPIKey, providerConfig).CaptureCharge(b.ctx, provider.CaptureRequest{ChargeID: *elsewhere.ProviderChargeID, IdempotencyKey: "dash"})
	require.Equal(t, provider.Succeeded, r.Outcome)
	a, _, err = b.svc.CheckHeld(b.ctx, elsewhere.ID, opt)
	require.NoError(t, err)
	require.Equal(t, attempts.Succeeded, a.Status)
	require.EqualValues(t, 500, a.AmountCaptured)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM anomalies WHERE attempt_id = $1 AND kind = 'unexpected_capture'`, elsewhere.ID))

	busy := b.authorized("order-busy")
	b.sim.SetFaults(t, providersim.Faults{DropAfterCommit: true, Captures: true})
	c, err := b.capture(b.svc, busy.ID, "cap-busy", 0)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, c.Code)
	b.sim.ClearFaults(t)
	_, outcome, err = b.svc.CheckHeld(b.ctx, busy.ID, opt)
	require.NoError(t, err)
	require.Equal(t, payments.Busy, outcome, "an UNKNOWN capture of ours holds it")
	require.Equal(t, attempts.Authorized, b.get(busy.ID).Status)
}

// TestCaptureNotSent: a capture no call of which reached the provider is
// 503 and stays CREATED with its key's fingerprint; the same key resumes it.
func TestCaptureNotSent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.authorized("order-ns")
	dead := b.service(payments.Provider(deadProvider(t)), timings)
	_, err := b.capture(dead, p.ID, "cap-1", 0)
	requireAppErr(t, err, apperr.ProviderUnavailable)
	require.Equal(t, "CREATED", b.stringOf(`SELECT status FROM captures WHERE payment_id = $1`, p.ID))
	_, err = b.capture(b.svc, p.ID, "cap-1", 100)
	requireAppErr(t, err, apperr.IdempotencyKeyReused)
	_, err = b.void(b.svc, p.ID, "void-1")
	requireAppErr(t, err, apperr.PaymentNotVoidable)
	r, err := b.capture(b.svc, p.ID, "cap-1", 0)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Code)
}

func (b *bundle) stringOf(query string, args ...any) string {
	b.t.Helper()
	var s string
	require.NoError(b.t, b.pool.QueryRow(b.ctx, query, args...).Scan(&s), query)
	return s
}

// deadProvider is a provider named sim that nothing listens for.
func deadProvider(t *testing.T) *provider.Resilient {
	return provider.NewResilient(simclient.NewHTTPClient("sim", "http://"+testkit.ReservedAddr(t), simAPIKey, &http.Client{}), providerConfig, nil)
}

// TestOriginIsAudited: a capture asked for by another front door (an
// operator's console) is audited with its source, and its reasons name who
// asked, on the capture's rows and on the payment's.
func TestOriginIsAudited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.authorized("order-console")
	in := payments.CaptureInput{OperationRequest: payments.OperationRequest{
		Origin:   payments.Origin{Source: lifecycle.SourceConsole, Actor: "ops@example.com"},
		TenantID: b.tenantID, PaymentID: p.ID, IdempotencyKey: "console-cap", Fingerprint: fp("console"),
	}}
	r, err := b.svc.Capture(b.ctx, in)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	c := decodeOp(t, r)
	sources := b.strings(`SELECT source || ': ' || reason FROM capture_events WHERE capture_id = $1 ORDER BY id`, c.ID)
	require.Equal(t, []string{
		"console: created; by operator ops@example.com",
		"console: calling provider sim; by operator ops@example.com",
		"console: provider sim succeeded; by operator ops@example.com",
	}, sources)
	last := b.strings(`SELECT source || ': ' || reason FROM payment_attempt_events WHERE attempt_id = $1 ORDER BY id DESC LIMIT 1`, p.ID)
	require.Equal(t, []string{"console: capture " + c.ID + " SUCCEEDED: provider sim succeeded; by operator ops@example.com"}, last)
}

func (b *bundle) strings(query string, args ...any) []string {
	b.t.Helper()
	return testdb.Strings[string](b.ctx, b.t, b.pool, query, args...)
}
