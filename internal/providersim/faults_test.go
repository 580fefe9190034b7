package providersim

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestErrorRateFault(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	before := decode[Charge](t, b.charge("k-before", 500, "pm_card_visa"))
	b.setFaults(Faults{ErrorRate: 1.0, ErrorStatus: http.StatusServiceUnavailable})

	for _, key := range []string{"k-fault-1", "k-fault-2", "k-before"} {
		r := b.charge(key, 500, "pm_card_visa")
		equal(t, r.status, http.StatusServiceUnavailable, key+" status")
		equal(t, errorCode(t, r), "simulated_fault", key+" code")
	}
	equal(t, b.stats(), Stats{ChargeCalls: 4, Charges: 1}, "stats")

	// Lookups are never faulted, and refunds only when the faults say "refunds":true.
	equal(t, b.do(http.MethodGet, "/v1/charges?idempotency_key=k-before", "", nil).status, http.StatusOK, "lookup status")
	equal(t, b.refund("k-refund", before.ID).status, http.StatusCreated, "refund status")

	// error_status 0 means 503.
	b.setFaults(Faults{ErrorRate: 1.0})
	equal(t, b.charge("k-fault-3", 500, "pm_card_visa").status, http.StatusServiceUnavailable, "default error status")
	b.setFaults(Faults{ErrorRate: 1.0, ErrorStatus: http.StatusInternalServerError})
	equal(t, b.charge("k-fault-4", 500, "pm_card_visa").status, http.StatusInternalServerError, "configured error status")
	equal(t, b.stats().Charges, 1, "charges after faults")
}

func TestDropAfterCommitFault(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.setFaults(Faults{DropAfterCommit: true})
	// A fresh connection per call: Go's transport silently retries a request
	// carrying Idempotency-Key once when a reused connection breaks, which
	// would hide the drop and add a charge call.
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	for attempt := 1; attempt <= 2; attempt++ {
		_, err := fresh.Do(b.request(http.MethodPost, "/v1/charges", "k-drop", chargeBody(500, "pm_card_visa"), true))
		if !errors.Is(err, io.EOF) {
			t.Fatalf("attempt %d: got error %v, want EOF", attempt, err)
		}
	}

	found := b.do(http.MethodGet, "/v1/charges?idempotency_key=k-drop", "", nil)
	equal(t, found.status, http.StatusOK, "lookup status")
	equal(t, decode[Charge](t, found).Status, StatusSucceeded, "charge status")
	equal(t, b.stats(), Stats{ChargeCalls: 2, Charges: 1}, "stats")

	b.setFaults(Faults{})
	r := b.charge("k-drop", 500, "pm_card_visa")
	equal(t, r.status, http.StatusCreated, "status once the fault is gone")
	equal(t, r.header.Get("Idempotent-Replayed"), "true", "replay header once the fault is gone")
}

func TestLatencyOutlivesTheCaller(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.setFaults(Faults{LatencyMS: 300})
	impatient := &http.Client{Timeout: 50 * time.Millisecond}

	_, err := impatient.Do(b.request(http.MethodPost, "/v1/charges", "k-slow", chargeBody(500, "pm_card_visa"), true))
	if err == nil {
		t.Fatal("a 50ms client got an answer from a 300ms provider")
	}

	eventually(t, "the abandoned charge to be created", func() bool {
		chs := b.charges()
		return len(chs) == 1 && chs[0].IdempotencyKey == "k-slow"
	})
	equal(t, b.stats(), Stats{ChargeCalls: 1, Charges: 1}, "stats")
}

func TestDeleteFaultsRestoresStartupLatency(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Latency: 20 * time.Millisecond})
	b.setFaults(Faults{LatencyMS: 800, ErrorRate: 1.0, ErrorStatus: 502, DropAfterCommit: true})
	equal(t, b.charge("k-faulted", 500, "pm_card_visa").status, http.StatusBadGateway, "faulted status")

	r := send(t, b.client, b.request(http.MethodDelete, "/_sim/faults", "", nil, false))
	equal(t, r.status, http.StatusOK, "DELETE status")

	got := decode[Faults](t, send(t, b.client, b.request(http.MethodGet, "/_sim/faults", "", nil, false)))
	equal(t, got, Faults{LatencyMS: 20}, "faults after DELETE")
	if !strings.Contains(string(send(t, b.client, b.request(http.MethodGet, "/_sim/faults", "", nil, false)).body), `"refunds":false`) {
		t.Fatal(`GET /_sim/faults lacks "refunds":false`)
	}
	equal(t, b.charge("k-after", 500, "pm_card_visa").status, http.StatusCreated, "status after DELETE")
}

func TestPutFaultsRejectsNonsense(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for name, body := range map[string]string{
		"rate above one":   `{"error_rate":1.5}`,
		"negative latency": `{"latency_ms":-1}`,
		"success status":   `{"error_rate":1,"error_status":200}`,
		"unknown field":    `{"latency":800}`,
		"bad json":         `{`,
	} {
		r := send(t, b.client, b.request(http.MethodPut, "/_sim/faults", "", body, false))
		equal(t, r.status, http.StatusBadRequest, name+" status")
		equal(t, errorCode(t, r), "invalid_request", name+" code")
	}
	got := decode[Faults](t, send(t, b.client, b.request(http.MethodGet, "/_sim/faults", "", nil, false)))
	equal(t, got, Faults{}, "faults unchanged")
}

// freshClient opens a new connection per request: Go's transport silently
// retries a request carrying Idempotency-Key once when a reused connection
// breaks, which would hide a dropped answer and add a call.
func freshClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
}

// TestRefundErrorRateFault: error_rate applies to refund calls only with
// "refunds":true, creates nothing, and leaves lookups alone.
func TestRefundErrorRateFault(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ch := decode[Charge](t, b.charge("k-charge", 1000, "pm_card_visa"))
	b.setFaults(Faults{ErrorRate: 1.0, ErrorStatus: http.StatusBadGateway})

	// Without "refunds":true, charges fail and refunds do not.
	equal(t, b.charge("k-charge-2", 500, "pm_card_visa").status, http.StatusBadGateway, "charge under charge faults")
	first := b.refundPart("k-first", ch.ID, 100)
	equal(t, first.status, http.StatusCreated, "refund under charge faults")

	b.setFaults(Faults{ErrorRate: 1.0, ErrorStatus: http.StatusBadGateway, Refunds: true})
	for _, key := range []string{"k-faulted", "k-first"} {
		wantRefused(t, b.refundPart(key, ch.ID, 100), http.StatusBadGateway, "simulated_fault", key)
	}
	equal(t, len(b.refunds()), 1, "refunds after faulted calls")
	equal(t, b.simCharge(ch.ID).AmountRefunded, 100, "amount_refunded after faulted calls")
	// Lookups are never faulted.
	equal(t, b.do(http.MethodGet, "/v1/refunds?idempotency_key=k-first", "", nil).status, http.StatusOK, "lookup of a refund")
	wantRefused(t, b.do(http.MethodGet, "/v1/refunds?idempotency_key=k-faulted", "", nil), http.StatusNotFound, "resource_missing", "lookup of a faulted key")
	equal(t, b.stats(), Stats{ChargeCalls: 2, Charges: 1, RefundCalls: 3, Refunds: 1}, "stats under faults")

	// The faulted key was not used up.
	b.setFaults(Faults{})
	r := b.refundPart("k-faulted", ch.ID, 100)
	equal(t, r.status, http.StatusCreated, "faulted key once the fault is gone")
	equal(t, r.header.Get("Idempotent-Replayed"), "", "faulted key once the fault is gone: not a replay")
	equal(t, b.simCharge(ch.ID).AmountRefunded, 200, "amount_refunded at the end")
}

// TestRefundDropAfterCommitFault: with "refunds":true the refund is made
// (or found, for its key again) and the connection closed without an
// answer; the same key afterwards answers that refund.
func TestRefundDropAfterCommitFault(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ch := decode[Charge](t, b.charge("k-charge", 1000, "pm_card_visa"))
	fresh := freshClient()

	// Without "refunds":true only charges lose their answers.
	b.setFaults(Faults{DropAfterCommit: true})
	equal(t, b.refundPart("k-answered", ch.ID, 100).status, http.StatusCreated, "refund under charge faults")

	b.setFaults(Faults{DropAfterCommit: true, Refunds: true})
	for attempt := 1; attempt <= 2; attempt++ {
		_, err := fresh.Do(b.request(http.MethodPost, "/v1/refunds", "k-drop", refundBody(ch.ID, 300), true))
		if !errors.Is(err, io.EOF) {
			t.Fatalf("attempt %d: got error %v, want EOF", attempt, err)
		}
	}
	found := b.do(http.MethodGet, "/v1/refunds?idempotency_key=k-drop", "", nil)
	equal(t, found.status, http.StatusOK, "lookup status")
	dropped := decode[Refund](t, found)
	equal(t, dropped.Amount, 300, "dropped refund's amount")
	equal(t, b.simCharge(ch.ID).AmountRefunded, 400, "amount_refunded: the dropped refund counted once")
	// A refusal has nothing to lose: it is answered.
	wantRefused(t, b.refundPart("k-drop-2", ch.ID, 601), http.StatusBadRequest, "amount_too_large", "refusal under drop")
	equal(t, b.stats(), Stats{ChargeCalls: 1, Charges: 1, RefundCalls: 4, Refunds: 2}, "stats")

	b.setFaults(Faults{})
	r := b.refundPart("k-drop", ch.ID, 300)
	equal(t, r.status, http.StatusCreated, "status once the fault is gone")
	equal(t, r.header.Get("Idempotent-Replayed"), "true", "replay header once the fault is gone")
	equal(t, decode[Refund](t, r), dropped, "the dropped refund")
	equal(t, len(b.refunds()), 2, "refunds at the end")
}

// TestRefundLatency: latency delays refund calls only with "refunds":true,
// is spent before the refund is made, and the refund is made even when
// the caller has hung up.
func TestRefundLatency(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Latency: 5 * time.Second}) // SIM_LATENCY delays charges only
	// Imported, since a charge call would sleep the 5s.
	ch := Charge{ID: "ch_slow", Amount: 1000, Currency: "USD", Status: StatusSucceeded, Created: time.Now().Unix()}
	equal(t, b.do(http.MethodPost, "/_sim/charges", "", map[string]any{"data": []Charge{ch}}).status, http.StatusOK, "import status")

	start := time.Now()
	equal(t, b.refundPart("k-fast", ch.ID, 100).status, http.StatusCreated, "refund under charge latency")
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("a refund took %v under a charge-only latency", took)
	}

	// The client gives up well after its request has arrived (on a loaded
	// machine a 50ms one gave up before sending it, and no refund was
	// ever made) and well before the provider answers.
	b.setFaults(Faults{LatencyMS: 3000, Refunds: true})
	impatient := &http.Client{Timeout: time.Second}
	_, err := impatient.Do(b.request(http.MethodPost, "/v1/refunds", "k-slow", refundBody(ch.ID, 200), true))
	if err == nil {
		t.Fatal("a 1s client got an answer from a 3s provider")
	}
	equal(t, len(b.refunds()), 1, "refunds while the slow one sleeps (latency comes first)")
	eventually(t, "the abandoned refund to be made", func() bool { return len(b.refunds()) == 2 })
	equal(t, b.simCharge(ch.ID).AmountRefunded, 300, "amount_refunded")
	equal(t, b.stats().RefundCalls, 2, "refund calls")
}
