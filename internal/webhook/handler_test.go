package webhook

import (
	"bytes"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
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
			b := b.with(t)
			a, chargeID := b.attempt(attempts.Pending)
			ev := newEvent(EventChargeSucceeded, a, chargeID)
			body := encode(t, ev)
			r := b.post(body, tc.header(body))
			if tc.ok {
				expectOK(t, r)
				require.EqualValues(t, 1, b.webhookEvents(ev.ID), "webhook rows")
				require.Equal(t, attempts.Succeeded, b.get(a.ID).Status, "status")
				return
			}
			require.NoError(t, r.CheckProblem(http.StatusUnauthorized, string(apperr.InvalidSignature)))
			require.EqualValues(t, 0, b.webhookEvents(ev.ID), "webhook rows")
			require.Equal(t, attempts.Pending, b.get(a.ID).Status, "status")
			require.EqualValues(t, 2, b.allAudits(a.ID), "audit rows (CREATED, PENDING)")
			require.EqualValues(t, 0, b.outbox(a.ID), "outbox rows")
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
		{"trailing garbage", string(encode(t, valid)) + "x", http.StatusBadRequest, string(apperr.InvalidRequest)},
		{"unknown type", strings.Replace(string(encode(t, valid)), EventChargeSucceeded, "charge.disputed", 1), http.StatusBadRequest, string(apperr.InvalidRequest)},
		{"missing id", strings.Replace(string(encode(t, valid)), `"id":"`+valid.ID+`"`, `"id":""`, 1), http.StatusBadRequest, string(apperr.InvalidRequest)},
		{"missing charge", noCharge, http.StatusBadRequest, string(apperr.InvalidRequest)},
		{"missing charge id", strings.Replace(string(encode(t, valid)), `"id":"`+chargeID+`"`, `"id":""`, 1), http.StatusBadRequest, string(apperr.InvalidRequest)},
		{"amount of the wrong type", strings.Replace(string(encode(t, valid)), `"amount":500`, `"amount":"500"`, 1), http.StatusBadRequest, string(apperr.InvalidRequest)},
		{"larger than 256 KiB", `{"id":"evt_big","pad":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, http.StatusRequestEntityTooLarge, string(apperr.PayloadTooLarge)},
	}
	// The group returns when its parallel subtests are done, so the checks
	// below see everything they did.
	t.Run("group", func(t *testing.T) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := b.with(t)
				body := []byte(tc.body)
				r := b.post(body, sign(testSecret, testNow.Unix(), body))
				require.NoError(t, r.CheckProblem(tc.status, tc.code))
			})
		}
		t.Run("unsigned junk is refused before it is parsed", func(t *testing.T) {
			t.Parallel()
			b := b.with(t)
			require.NoError(t, b.post([]byte(`{`), "").CheckProblem(http.StatusUnauthorized, string(apperr.InvalidSignature)))
		})
		t.Run("larger than 256 KiB without a Content-Length", func(t *testing.T) {
			t.Parallel()
			b := b.with(t)
			big := []byte(`{"id":"evt_big","pad":"` + strings.Repeat("x", MaxBodyBytes) + `"}`)
			// A reader of unknown length makes the client send the body chunked.
			req, err := http.NewRequest(http.MethodPost, b.url, io.MultiReader(bytes.NewReader(big)))
			require.NoError(t, err, "new request")
			req.Header.Set(HeaderSignature, sign(testSecret, testNow.Unix(), big))
			resp, err := b.client.HTTP.Do(req)
			require.NoError(t, err, "POST")
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			require.NoError(t, err, "read body")
			require.Equal(t, int64(0), req.ContentLength, "request content length (unknown)")
			r := apiclient.Response{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
			require.NoError(t, r.CheckProblem(http.StatusRequestEntityTooLarge, string(apperr.PayloadTooLarge)))
		})
		t.Run("GET", func(t *testing.T) {
			t.Parallel()
			b := b.with(t)
			h := NewHandler(b.pool, "sim", []string{testSecret}, nil)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/webhooks/sim", nil))
			require.Equal(t, http.StatusMethodNotAllowed, rec.Code, "status")
			require.Equal(t, http.MethodPost, rec.Header().Get("Allow"), "Allow")
		})
	})
	require.EqualValues(t, 0, b.count(`SELECT count(*) FROM webhook_events`), "webhook rows")
	require.Equal(t, attempts.Pending, b.get(a.ID).Status, "status")
	require.EqualValues(t, 0, b.allAnomalies(), "anomalies")
}

func TestSameEventConcurrentlyAppliedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, chargeID := b.attempt(attempts.Pending)
	body := encode(t, newEvent(EventChargeSucceeded, a, chargeID))
	sig := sign(testSecret, testNow.Unix(), body)

	const deliveries = 10
	replies := make([]apiclient.Response, deliveries)
	errs := make([]error, deliveries)
	testkit.Together(deliveries, func(i int) { replies[i], errs[i] = b.tryPost(body, sig) })
	for i := range deliveries {
		require.NoError(t, errs[i], "delivery "+strconv.Itoa(i))
		expectOK(t, replies[i])
	}
	require.EqualValues(t, 1, b.count(`SELECT count(*) FROM webhook_events`), "webhook rows")
	require.EqualValues(t, 1, b.audits(a.ID, attempts.Succeeded), "SUCCEEDED audit rows")
	require.EqualValues(t, 1, b.outbox(a.ID), "outbox rows")
	require.EqualValues(t, 1, b.count(`SELECT count(*) FROM webhook_events WHERE outcome = 'applied'`), "applied events")
}

func TestTransitions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	t.Run("PENDING to SUCCEEDED", func(t *testing.T) {
		t.Parallel()
		b := b.with(t)
		a, chargeID := b.attempt(attempts.Pending)
		ev := newEvent(EventChargeSucceeded, a, chargeID)
		expectOK(t, b.deliver(ev))
		got := b.get(a.ID)
		require.Equal(t, attempts.Succeeded, got.Status, "status")
		require.Equal(t, chargeID, deref(got.ProviderChargeID), "charge id")
		require.EqualValues(t, 1, b.count(`SELECT count(*) FROM payment_attempt_events WHERE attempt_id = $1 AND to_status = 'SUCCEEDED' AND from_status = 'PENDING' AND source = 'webhook'`, a.ID), "webhook audit rows")
		require.EqualValues(t, 1, b.outbox(a.ID), "outbox rows")
		require.Equal(t, outcomeApplied, b.outcome(ev.ID), "outcome")
		require.EqualValues(t, 1, b.count(`SELECT count(*) FROM webhook_events WHERE event_id = $1 AND attempt_id = $2 AND charge_id = $3 AND type = $4`, ev.ID, a.ID, chargeID, ev.Type), "webhook row fields")

		expectOK(t, b.deliver(ev)) // redelivery
		require.EqualValues(t, 1, b.audits(a.ID, attempts.Succeeded), "SUCCEEDED audit rows after redelivery")
		require.EqualValues(t, 1, b.webhookEvents(ev.ID), "webhook rows after redelivery")
	})
	t.Run("UNKNOWN to FAILED", func(t *testing.T) {
		t.Parallel()
		b := b.with(t)
		a, chargeID := b.attempt(attempts.Unknown)
		ev := newEvent(EventChargeFailed, a, chargeID)
		ev.Data.Charge.FailureCode = "insufficient_funds"
		expectOK(t, b.deliver(ev))
		got := b.get(a.ID)
		require.Equal(t, attempts.Failed, got.Status, "status")
		require.Equal(t, "insufficient_funds", deref(got.FailureCode), "failure code")
		require.Equal(t, chargeID, deref(got.ProviderChargeID), "charge id")
		require.EqualValues(t, 1, b.count(`SELECT count(*) FROM payment_attempt_events WHERE attempt_id = $1 AND from_status = 'UNKNOWN' AND to_status = 'FAILED' AND source = 'webhook'`, a.ID), "webhook audit rows")
		require.EqualValues(t, 1, b.outbox(a.ID), "outbox rows (PaymentFailed)")
		require.Equal(t, outcomeApplied, b.outcome(ev.ID), "outcome")
	})
	t.Run("PENDING to FAILED without a failure code", func(t *testing.T) {
		t.Parallel()
		b := b.with(t)
		a, chargeID := b.attempt(attempts.Pending)
		ev := newEvent(EventChargeFailed, a, chargeID)
		ev.Data.Charge.FailureCode = ""
		expectOK(t, b.deliver(ev))
		got := b.get(a.ID)
		require.Equal(t, attempts.Failed, got.Status, "status")
		require.Equal(t, defaultFailureCode, deref(got.FailureCode), "failure code")
	})
	t.Run("found by charge id without a reference", func(t *testing.T) {
		t.Parallel()
		b := b.with(t)
		a, chargeID := b.attempt(attempts.Succeeded)
		ev := newEvent(EventChargeRefunded, a, chargeID)
		ev.Data.Charge.Reference, ev.Data.Charge.IdempotencyKey = "", ""
		expectOK(t, b.deliver(ev))
		require.EqualValues(t, 0, b.count(`SELECT count(*) FROM anomalies WHERE charge_id = $1`, chargeID), "a refunded charge is no anomaly")
		require.EqualValues(t, 1, b.count(`SELECT count(*) FROM webhook_events WHERE event_id = $1 AND attempt_id = $2`, ev.ID, a.ID), "webhook row names the attempt")
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
			b := b.with(t)
			a, own := b.attempt(tc.status)
			audits := b.allAudits(a.ID)
			chargeID := tc.charge(own)
			ev := newEvent(tc.typ, a, chargeID)
			for range 2 { // the redelivery must not add a second anomaly
				expectOK(t, b.deliver(ev))
			}
			got := b.get(a.ID)
			require.Equal(t, tc.status, got.Status, "status")
			require.Equal(t, a.UpdatedAt, got.UpdatedAt, "updated_at")
			require.Equal(t, audits, b.allAudits(a.ID), "audit rows")
			require.Equal(t, map[bool]int{true: 1, false: 0}[tc.status.Final()], b.outbox(a.ID), "outbox rows (its final event)")
			require.Equal(t, tc.outcome, b.outcome(ev.ID), "outcome")
			want := 0
			if tc.anomaly != "" {
				want = 1
				require.EqualValues(t, 1, b.anomalies(tc.anomaly, chargeID), "%s anomalies", tc.anomaly)
				require.EqualValues(t, 1, b.count(`SELECT count(*) FROM anomalies WHERE attempt_id = $1 AND source = 'webhook' AND dedupe_key = $2`, a.ID, "webhook:sim:"+ev.ID), "anomaly fields")
			}
			require.Equal(t, want, b.count(`SELECT count(*) FROM anomalies WHERE attempt_id = $1`, a.ID), "anomalies of the attempt")
		})
	}
}

// An event already recorded (by another pod, or before a crash that lost
// the answer) is a duplicate: answered 200, not applied again, its row
// kept as it was.
func TestRecordedEventIsADuplicate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, chargeID := b.attempt(attempts.Pending)
	ev := newEvent(EventChargeSucceeded, a, chargeID)
	testdb.WebhookEvent(t, b.pool, testdb.WebhookEventOpts{EventID: ev.ID, Type: ev.Type, ChargeID: chargeID, AttemptID: a.ID, Outcome: outcomeNoop})

	expectOK(t, b.deliver(ev))
	require.Equal(t, attempts.Pending, b.get(a.ID).Status, "the event is not applied again")
	require.Equal(t, 2, b.allAudits(a.ID), "audit rows (CREATED, PENDING)")
	require.Equal(t, 0, b.outbox(a.ID), "outbox rows")
	require.Equal(t, 1, b.webhookEvents(ev.ID), "webhook rows")
	require.Equal(t, outcomeNoop, b.outcome(ev.ID), "the recorded outcome is kept")
	require.Equal(t, 0, b.allAnomalies(), "anomalies")
}

func TestUnknownCharge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	t.Run("no payment", func(t *testing.T) {
		t.Parallel()
		b := b.with(t)
		ghost := attempts.Attempt{ID: attempts.NewID(), Amount: 700, Currency: "EUR", PaymentMethod: "pm_card_visa"}
		ev := newEvent(EventChargeSucceeded, ghost, testkit.RandomID("ch_"))
		expectOK(t, b.deliver(ev))
		require.Equal(t, outcomeUnknownCharge, b.outcome(ev.ID), "outcome")
		require.EqualValues(t, 1, b.anomalies(anomalyUnknownCharge, ev.Data.Charge.ID), "unknown_charge anomalies")
		expectOK(t, b.deliver(ev))
		require.EqualValues(t, 1, b.anomalies(anomalyUnknownCharge, ev.Data.Charge.ID), "unknown_charge anomalies after redelivery")
	})
	t.Run("reference to a payment whose key it was not made with", func(t *testing.T) {
		t.Parallel()
		b := b.with(t)
		a, _ := b.attempt(attempts.Pending)
		ev := newEvent(EventChargeSucceeded, a, testkit.RandomID("ch_"))
		ev.Data.Charge.IdempotencyKey = "psvc_pay_someoneelse"
		expectOK(t, b.deliver(ev))
		require.Equal(t, outcomeUnknownCharge, b.outcome(ev.ID), "outcome")
		require.EqualValues(t, 1, b.anomalies(anomalyUnknownCharge, ev.Data.Charge.ID), "unknown_charge anomalies")
		require.Equal(t, attempts.Pending, b.get(a.ID).Status, "status")
	})
}

// TestDecideIsTotal states the verdict of every status × event type, for an
// attempt that recorded no charge, the event's charge, or another charge:
// only PENDING and UNKNOWN move, along an edge, to the reported status;
// a report contradicting a final or never-sent attempt is a conflict.
func TestDecideIsTotal(t *testing.T) {
	t.Parallel()
	const (
		ok, cf = verdictNoop, verdictConflict
		mv     = verdictMove
	)
	type want struct {
		kind verdictKind
		to   attempts.Status // for mv
	}
	// By status, the verdicts on charge.succeeded, charge.failed and
	// charge.refunded about the charge the attempt recorded (or none).
	table := map[attempts.Status][3]want{
		attempts.Created:   {{cf, ""}, {cf, ""}, {ok, ""}},
		attempts.Pending:   {{mv, attempts.Succeeded}, {mv, attempts.Failed}, {ok, ""}},
		attempts.Unknown:   {{mv, attempts.Succeeded}, {mv, attempts.Failed}, {ok, ""}},
		attempts.Succeeded: {{ok, ""}, {cf, ""}, {ok, ""}},
		attempts.Failed:    {{cf, ""}, {ok, ""}, {ok, ""}},
	}
	types := [3]string{EventChargeSucceeded, EventChargeFailed, EventChargeRefunded}
	for _, st := range []attempts.Status{attempts.Created, attempts.Pending, attempts.Unknown, attempts.Succeeded, attempts.Failed} {
		for i, typ := range types {
			for _, recorded := range []string{"", "ch_1", "ch_other"} {
				var ev event
				ev.ID, ev.Type = "evt_1", typ
				ev.Data.Charge = &provider.Charge{ID: "ch_1"}
				a := attempts.Attempt{Status: st}
				w := table[st][i]
				if recorded != "" {
					a.ProviderChargeID = &recorded
				}
				if recorded == "ch_other" {
					w = want{kind: cf} // another charge than the one recorded
				}
				v := decide(a, ev)
				require.Equal(t, w.kind, v.kind, "%s on %s (recorded charge %q)", typ, st, recorded)
				if w.kind == mv {
					require.Equal(t, w.to, v.to, "%s on %s", typ, st)
					require.True(t, attempts.CanTransition(st, v.to), "%s on %s moves along an edge", typ, st)
				}
				if w.kind == cf {
					require.NotEmpty(t, v.reason, "%s on %s: an anomaly says why", typ, st)
				}
			}
		}
	}
}

func same(own string) string { return own }
func other(string) string    { return testkit.RandomID("ch_") }

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
