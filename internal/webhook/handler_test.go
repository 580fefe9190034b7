package webhook

import (
	"bytes"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/provider"
)

func TestSignatureOverHTTP(t *testing.T) {
	t.Parallel()
	const second = "whsec_test_rotated_in"
	b := setup(t, testSecret, second)
	ts := testNow.Unix()
	cases := []struct {
		name   string
		header func(body []byte) string
		ok     bool
	}{
		{"valid", func(body []byte) string { return sign(testSecret, ts, body) }, true},
		{"rotated secret", func(body []byte) string { return sign(second, ts, body) }, true},
		{"two v1, one valid", func(body []byte) string {
			return sign("whsec_wrong", ts, body) + ",v1=" + hex.EncodeToString(mac(second, ts, body))
		}, true},
		{"300s old", func(body []byte) string { return sign(testSecret, ts-300, body) }, true},
		{"wrong secret", func(body []byte) string { return sign("whsec_wrong", ts, body) }, false},
		{"stale", func(body []byte) string { return sign(testSecret, ts-301, body) }, false},
		{"future", func(body []byte) string { return sign(testSecret, ts+301, body) }, false},
		{"missing", func([]byte) string { return "" }, false},
		{"no t", func(body []byte) string { return "v1=" + hex.EncodeToString(mac(testSecret, ts, body)) }, false},
		{"no v1", func([]byte) string { return "t=" + strconv.FormatInt(ts, 10) }, false},
		{"t twice", func(body []byte) string { return "t=1," + sign(testSecret, ts, body) }, false},
		{"v1 not hex", func([]byte) string { return "t=" + strconv.FormatInt(ts, 10) + ",v1=" + strings.Repeat("zz", 32) }, false},
		{"garbage", func([]byte) string { return "not a signature" }, false},
		{"signed body differs", func(body []byte) string {
			return sign(testSecret, ts, bytes.Replace(body, []byte("charge.succeeded"), []byte("charge.failed"), 1))
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, chargeID := b.attempt(attempts.Pending)
			ev := newEvent(EventChargeSucceeded, a, chargeID)
			body := ev.body(t)
			r := b.post(body, tc.header(body))
			if tc.ok {
				expectOK(t, r)
				eq(t, b.webhookEvents(ev.ID), 1, "webhook rows")
				eq(t, b.get(a.ID).Status, attempts.Succeeded, "status")
				return
			}
			expectProblem(t, r, http.StatusUnauthorized, string(apperr.InvalidSignature))
			eq(t, b.webhookEvents(ev.ID), 0, "webhook rows")
			eq(t, b.get(a.ID).Status, attempts.Pending, "status")
			eq(t, b.allAudits(a.ID), 2, "audit rows (CREATED, PENDING)")
			eq(t, b.outbox(a.ID), 0, "outbox rows")
		})
	}
}

func TestRefusedRequestsStoreNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, chargeID := b.attempt(attempts.Pending)
	valid := newEvent(EventChargeSucceeded, a, chargeID)
	noCharge := `{"id":"evt_nocharge","type":"charge.succeeded","created":1,"data":{}}`
	cases := []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"malformed JSON", `{"id":"evt_x","type":`, http.StatusBadRequest, string(apperr.InvalidRequest)},
		{"not an object", `["evt_x"]`, http.StatusBadRequest, string(apperr.InvalidRequest)},
		{"trailing garbage", string(valid.body(t)) + "x", http.StatusBadRequest, string(apperr.InvalidRequest)},
		{"unknown type", strings.Replace(string(valid.body(t)), EventChargeSucceeded, "charge.disputed", 1), http.StatusBadRequest, string(apperr.InvalidRequest)},
		{"missing id", strings.Replace(string(valid.body(t)), `"id":"`+valid.ID+`"`, `"id":""`, 1), http.StatusBadRequest, string(apperr.InvalidRequest)},
		{"missing charge", noCharge, http.StatusBadRequest, string(apperr.InvalidRequest)},
		{"missing charge id", strings.Replace(string(valid.body(t)), `"id":"`+chargeID+`"`, `"id":""`, 1), http.StatusBadRequest, string(apperr.InvalidRequest)},
		{"amount of the wrong type", strings.Replace(string(valid.body(t)), `"amount":500`, `"amount":"500"`, 1), http.StatusBadRequest, string(apperr.InvalidRequest)},
		{"larger than 256 KiB", `{"id":"evt_big","pad":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, http.StatusRequestEntityTooLarge, string(apperr.PayloadTooLarge)},
	}
	// The group returns when its parallel subtests are done, so the checks
	// below see everything they did.
	t.Run("group", func(t *testing.T) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				body := []byte(tc.body)
				r := b.post(body, sign(testSecret, testNow.Unix(), body))
				expectProblem(t, r, tc.status, tc.code)
			})
		}
		t.Run("unsigned junk is refused before it is parsed", func(t *testing.T) {
			t.Parallel()
			expectProblem(t, b.post([]byte(`{`), ""), http.StatusUnauthorized, string(apperr.InvalidSignature))
		})
		t.Run("larger than 256 KiB without a Content-Length", func(t *testing.T) {
			t.Parallel()
			big := []byte(`{"id":"evt_big","pad":"` + strings.Repeat("x", MaxBodyBytes) + `"}`)
			// A reader of unknown length makes the client send the body chunked.
			req, err := http.NewRequest(http.MethodPost, b.url, io.MultiReader(bytes.NewReader(big)))
			noErr(t, err, "new request")
			req.Header.Set(HeaderSignature, sign(testSecret, testNow.Unix(), big))
			resp, err := b.client.Do(req)
			noErr(t, err, "POST")
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			noErr(t, err, "read body")
			eq(t, req.ContentLength, int64(0), "request content length (unknown)")
			expectProblem(t, reply{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: raw},
				http.StatusRequestEntityTooLarge, string(apperr.PayloadTooLarge))
		})
		t.Run("GET", func(t *testing.T) {
			t.Parallel()
			h := NewHandler(b.pool, "sim", []string{testSecret}, nil)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/webhooks/sim", nil))
			eq(t, rec.Code, http.StatusMethodNotAllowed, "status")
			eq(t, rec.Header().Get("Allow"), http.MethodPost, "Allow")
		})
	})
	eq(t, b.count(`SELECT count(*) FROM webhook_events`), 0, "webhook rows")
	eq(t, b.get(a.ID).Status, attempts.Pending, "status")
	eq(t, b.allAnomalies(), 0, "anomalies")
}

func TestSameEventConcurrentlyAppliedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, chargeID := b.attempt(attempts.Pending)
	body := newEvent(EventChargeSucceeded, a, chargeID).body(t)
	sig := sign(testSecret, testNow.Unix(), body)

	const deliveries = 10
	start := make(chan struct{})
	replies := make([]reply, deliveries)
	errs := make([]error, deliveries)
	var wg sync.WaitGroup
	for i := range deliveries {
		wg.Go(func() {
			<-start
			replies[i], errs[i] = b.tryPost(body, sig)
		})
	}
	close(start)
	wg.Wait()
	for i := range deliveries {
		noErr(t, errs[i], "delivery "+strconv.Itoa(i))
		expectOK(t, replies[i])
	}
	eq(t, b.count(`SELECT count(*) FROM webhook_events`), 1, "webhook rows")
	eq(t, b.audits(a.ID, attempts.Succeeded), 1, "SUCCEEDED audit rows")
	eq(t, b.outbox(a.ID), 1, "outbox rows")
	eq(t, b.count(`SELECT count(*) FROM webhook_events WHERE outcome = 'applied'`), 1, "applied events")
}

func TestTransitions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	t.Run("PENDING to SUCCEEDED", func(t *testing.T) {
		t.Parallel()
		a, chargeID := b.attempt(attempts.Pending)
		ev := newEvent(EventChargeSucceeded, a, chargeID)
		expectOK(t, b.deliver(ev))
		got := b.get(a.ID)
		eq(t, got.Status, attempts.Succeeded, "status")
		eq(t, deref(got.ProviderChargeID), chargeID, "charge id")
		eq(t, b.count(`SELECT count(*) FROM payment_attempt_events WHERE attempt_id = $1 AND to_status = 'SUCCEEDED' AND from_status = 'PENDING' AND source = 'webhook'`, a.ID), 1, "webhook audit rows")
		eq(t, b.outbox(a.ID), 1, "outbox rows")
		eq(t, b.outcome(ev.ID), outcomeApplied, "outcome")
		eq(t, b.count(`SELECT count(*) FROM webhook_events WHERE event_id = $1 AND attempt_id = $2 AND charge_id = $3 AND type = $4`, ev.ID, a.ID, chargeID, ev.Type), 1, "webhook row fields")

		expectOK(t, b.deliver(ev)) // redelivery
		eq(t, b.audits(a.ID, attempts.Succeeded), 1, "SUCCEEDED audit rows after redelivery")
		eq(t, b.webhookEvents(ev.ID), 1, "webhook rows after redelivery")
	})
	t.Run("UNKNOWN to FAILED", func(t *testing.T) {
		t.Parallel()
		a, chargeID := b.attempt(attempts.Unknown)
		ev := newEvent(EventChargeFailed, a, chargeID)
		ev.Data.Charge.FailureCode = "insufficient_funds"
		expectOK(t, b.deliver(ev))
		got := b.get(a.ID)
		eq(t, got.Status, attempts.Failed, "status")
		eq(t, deref(got.FailureCode), "insufficient_funds", "failure code")
		eq(t, deref(got.ProviderChargeID), chargeID, "charge id")
		eq(t, b.count(`SELECT count(*) FROM payment_attempt_events WHERE attempt_id = $1 AND from_status = 'UNKNOWN' AND to_status = 'FAILED' AND source = 'webhook'`, a.ID), 1, "webhook audit rows")
		eq(t, b.outbox(a.ID), 1, "outbox rows (PaymentFailed)")
		eq(t, b.outcome(ev.ID), outcomeApplied, "outcome")
	})
	t.Run("PENDING to FAILED without a failure code", func(t *testing.T) {
		t.Parallel()
		a, chargeID := b.attempt(attempts.Pending)
		ev := newEvent(EventChargeFailed, a, chargeID)
		ev.Data.Charge.FailureCode = ""
		expectOK(t, b.deliver(ev))
		got := b.get(a.ID)
		eq(t, got.Status, attempts.Failed, "status")
		eq(t, deref(got.FailureCode), defaultFailureCode, "failure code")
	})
	t.Run("found by charge id without a reference", func(t *testing.T) {
		t.Parallel()
		a, chargeID := b.attempt(attempts.Succeeded)
		ev := newEvent(EventChargeRefunded, a, chargeID)
		ev.Data.Charge.Reference, ev.Data.Charge.IdempotencyKey = "", ""
		expectOK(t, b.deliver(ev))
		eq(t, b.count(`SELECT count(*) FROM anomalies WHERE charge_id = $1`, chargeID), 0, "a refunded charge is no anomaly")
		eq(t, b.count(`SELECT count(*) FROM webhook_events WHERE event_id = $1 AND attempt_id = $2`, ev.ID, a.ID), 1, "webhook row names the attempt")
	})
}

func TestReportsThatChangeNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		name    string
		status  attempts.Status
		typ     string
		charge  func(own string) string
		outcome string
		anomaly string // kind recorded, "" for none
	}{
		{"failed after succeeded", attempts.Succeeded, EventChargeFailed, same, outcomeAnomaly, anomalyConflictingReport},
		{"succeeded after failed", attempts.Failed, EventChargeSucceeded, same, outcomeAnomaly, anomalyConflictingReport},
		{"succeeded with another charge", attempts.Succeeded, EventChargeSucceeded, other, outcomeAnomaly, anomalyConflictingReport},
		{"succeeded for a payment never sent", attempts.Created, EventChargeSucceeded, same, outcomeAnomaly, anomalyConflictingReport},
		{"failed for a payment never sent", attempts.Created, EventChargeFailed, same, outcomeAnomaly, anomalyConflictingReport},
		{"succeeded again", attempts.Succeeded, EventChargeSucceeded, same, outcomeNoop, ""},
		{"failed again", attempts.Failed, EventChargeFailed, same, outcomeNoop, ""},
		{"refund of a succeeded payment", attempts.Succeeded, EventChargeRefunded, same, outcomeNoop, ""},
		{"refund of a failed payment", attempts.Failed, EventChargeRefunded, same, outcomeNoop, ""},
		{"refund of a pending payment", attempts.Pending, EventChargeRefunded, same, outcomeNoop, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, own := b.attempt(tc.status)
			audits := b.allAudits(a.ID)
			chargeID := tc.charge(own)
			ev := newEvent(tc.typ, a, chargeID)
			for range 2 { // the redelivery must not add a second anomaly
				expectOK(t, b.deliver(ev))
			}
			got := b.get(a.ID)
			eq(t, got.Status, tc.status, "status")
			eq(t, got.UpdatedAt, a.UpdatedAt, "updated_at")
			eq(t, b.allAudits(a.ID), audits, "audit rows")
			eq(t, b.outbox(a.ID), map[bool]int{true: 1, false: 0}[tc.status.Final()], "outbox rows (its final event)")
			eq(t, b.outcome(ev.ID), tc.outcome, "outcome")
			want := 0
			if tc.anomaly != "" {
				want = 1
				eq(t, b.anomalies(tc.anomaly, chargeID), 1, "%s anomalies", tc.anomaly)
				eq(t, b.count(`SELECT count(*) FROM anomalies WHERE attempt_id = $1 AND source = 'webhook' AND dedupe_key = $2`, a.ID, "webhook:sim:"+ev.ID), 1, "anomaly fields")
			}
			eq(t, b.count(`SELECT count(*) FROM anomalies WHERE attempt_id = $1`, a.ID), want, "anomalies of the attempt")
		})
	}
}

func TestUnknownCharge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	t.Run("no payment", func(t *testing.T) {
		t.Parallel()
		ghost := attempts.Attempt{ID: attempts.NewID(), Amount: 700, Currency: "EUR", PaymentMethod: "pm_card_visa"}
		ev := newEvent(EventChargeSucceeded, ghost, "ch_"+randomHex(8))
		expectOK(t, b.deliver(ev))
		eq(t, b.outcome(ev.ID), outcomeUnknownCharge, "outcome")
		eq(t, b.anomalies(anomalyUnknownCharge, ev.Data.Charge.ID), 1, "unknown_charge anomalies")
		expectOK(t, b.deliver(ev))
		eq(t, b.anomalies(anomalyUnknownCharge, ev.Data.Charge.ID), 1, "unknown_charge anomalies after redelivery")
	})
	t.Run("reference to a payment whose key it was not made with", func(t *testing.T) {
		t.Parallel()
		a, _ := b.attempt(attempts.Pending)
		ev := newEvent(EventChargeSucceeded, a, "ch_"+randomHex(8))
		ev.Data.Charge.IdempotencyKey = "psvc_pay_someoneelse"
		expectOK(t, b.deliver(ev))
		eq(t, b.outcome(ev.ID), outcomeUnknownCharge, "outcome")
		eq(t, b.anomalies(anomalyUnknownCharge, ev.Data.Charge.ID), 1, "unknown_charge anomalies")
		eq(t, b.get(a.ID).Status, attempts.Pending, "status")
	})
}

func TestDecideIsTotal(t *testing.T) {
	t.Parallel()
	// Every status × type has a verdict, and only PENDING/UNKNOWN ever move.
	for _, st := range []attempts.Status{attempts.Created, attempts.Pending, attempts.Unknown, attempts.Succeeded, attempts.Failed} {
		for _, typ := range []string{EventChargeSucceeded, EventChargeFailed, EventChargeRefunded} {
			var ev event
			ev.Type = typ
			ev.Data.Charge = &provider.Charge{ID: "ch_1"}
			v := decide(attempts.Attempt{Status: st}, ev)
			if v.kind == verdictMove && !attempts.CanTransition(st, v.to) {
				t.Fatalf("%s on %s moves along a missing edge to %s", typ, st, v.to)
			}
			if v.kind == verdictMove && st != attempts.Pending && st != attempts.Unknown {
				t.Fatalf("%s on %s moves", typ, st)
			}
		}
	}
}

func same(own string) string { return own }
func other(string) string    { return "ch_" + randomHex(8) }

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
