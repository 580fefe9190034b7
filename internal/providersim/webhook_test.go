package providersim

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const testWebhookSecret = "whsec_test"

// delivery is one webhook request the receiver got.
type delivery struct {
	contentType string
	signature   string
	body        []byte
	event       Event
}

// receiver is a webhook endpoint that fails its first failFirst deliveries.
type receiver struct {
	mu         sync.Mutex
	failFirst  int
	deliveries []delivery
}

func newReceiver(t *testing.T, failFirst int) (*receiver, string) {
	rc := &receiver{failFirst: failFirst}
	srv := httptest.NewServer(http.HandlerFunc(rc.serveHTTP))
	t.Cleanup(srv.Close)
	return rc, srv.URL + "/hooks"
}

func (rc *receiver) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	d := delivery{contentType: r.Header.Get("Content-Type"), signature: r.Header.Get("Sim-Signature"), body: body}
	_ = json.Unmarshal(body, &d.event)
	rc.mu.Lock()
	rc.deliveries = append(rc.deliveries, d)
	fail := len(rc.deliveries) <= rc.failFirst
	rc.mu.Unlock()
	if fail {
		http.Error(w, "not now", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (rc *receiver) got() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.deliveries...)
}

// verifySignature checks header against body independently of SignatureHeader.
func verifySignature(t *testing.T, secret, header string, body []byte) {
	t.Helper()
	tPart, v1Part, ok := strings.Cut(header, ",")
	if !ok || !strings.HasPrefix(tPart, "t=") || !strings.HasPrefix(v1Part, "v1=") {
		t.Fatalf("malformed signature header %q", header)
	}
	ts, err := strconv.ParseInt(strings.TrimPrefix(tPart, "t="), 10, 64)
	noErr(t, err, "signature timestamp")
	if d := time.Since(time.Unix(ts, 0)); d < -time.Minute || d > time.Minute {
		t.Fatalf("signature timestamp %d is not now", ts)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(ts, 10) + "." + string(body)))
	equal(t, strings.TrimPrefix(v1Part, "v1="), hex.EncodeToString(mac.Sum(nil)), "signature")
	equal(t, SignatureHeader(secret, ts, body), header, "SignatureHeader")
}

func TestSignatureHeader(t *testing.T) {
	t.Parallel()
	// Expected value computed independently: HMAC-SHA256("whsec_test", `1700000000.{"id":"evt_1"}`).
	mac := hmac.New(sha256.New, []byte(testWebhookSecret))
	mac.Write([]byte(`1700000000.{"id":"evt_1"}`))
	want := "t=1700000000,v1=" + hex.EncodeToString(mac.Sum(nil))
	equal(t, SignatureHeader(testWebhookSecret, 1700000000, []byte(`{"id":"evt_1"}`)), want, "header")
}

func TestWebhookRetriedUntilDelivered(t *testing.T) {
	t.Parallel()
	rc, url := newReceiver(t, 2)
	b := setup(t, Config{WebhookURL: url, WebhookSecret: testWebhookSecret})
	ch := decode[Charge](t, b.charge("k-hook", 500, "pm_card_visa"))

	eventually(t, "the webhook to be delivered", func() bool { return b.stats().WebhooksSent == 1 })

	got := rc.got()
	equal(t, len(got), 3, "deliveries (two failed, one accepted)")
	for i, d := range got {
		equal(t, d.contentType, "application/json", "content type")
		verifySignature(t, testWebhookSecret, d.signature, d.body)
		equal(t, d.event.ID, got[0].event.ID, "event id of attempt "+strconv.Itoa(i+1))
		equal(t, string(d.body), string(got[0].body), "body of attempt "+strconv.Itoa(i+1))
	}
	ev := got[0].event
	if !strings.HasPrefix(ev.ID, "evt_") || len(ev.ID) != len("evt_")+24 {
		t.Fatalf("event id %q", ev.ID)
	}
	equal(t, ev.Type, EventChargeSucceeded, "type")
	equal(t, ev.Data.Charge, ch, "charge in event")
	equal(t, b.stats(), Stats{ChargeCalls: 1, Charges: 1, WebhooksSent: 1}, "stats")
}

func TestWebhookEventTypes(t *testing.T) {
	t.Parallel()
	rc, url := newReceiver(t, 0)
	b := setup(t, Config{WebhookURL: url, WebhookSecret: testWebhookSecret})
	paid := decode[Charge](t, b.charge("k-paid", 500, "pm_card_visa"))
	declined := decode[struct{ Charge Charge }](t, b.charge("k-declined", 500, "pm_card_declined")).Charge
	refund := decode[Refund](t, b.refund("k-refund", paid.ID))
	// Replays and refusals create nothing and so announce nothing.
	equal(t, b.charge("k-paid", 500, "pm_card_visa").header.Get("Idempotent-Replayed"), "true", "charge replay")
	equal(t, b.refund("k-refund", paid.ID).header.Get("Idempotent-Replayed"), "true", "refund replay")
	equal(t, b.refund("k-refund-2", paid.ID).status, http.StatusBadRequest, "refused refund")

	eventually(t, "four webhooks to be delivered", func() bool { return b.stats().WebhooksSent == 4 })
	equal(t, b.sim.hooks.queued.Load(), 4, "events queued")

	byType := map[string]Event{}
	for _, d := range rc.got() {
		verifySignature(t, testWebhookSecret, d.signature, d.body)
		byType[d.event.Type] = d.event
	}
	equal(t, len(byType), 4, "distinct event types")
	equal(t, byType[EventChargeSucceeded].Data.Charge, paid, "charge.succeeded charge")
	equal(t, byType[EventChargeFailed].Data.Charge, declined, "charge.failed charge")
	equal(t, *byType[EventRefundSucceeded].Data.Refund, refund, "refund.succeeded refund")
	refunded := paid
	refunded.AmountRefunded, refunded.Refunded = 500, true
	equal(t, byType[EventChargeRefunded].Data.Charge, refunded, "charge.refunded charge")
	equal(t, byType[EventChargeRefunded].Data.Refund == nil, true, "charge.refunded carries no refund")
}

// TestRefundWebhooks: each refund, partial or not, is announced by
// refund.succeeded with {"data":{"refund":…}} and by charge.refunded with the
// charge as the refund left it, both signed like every event.
func TestRefundWebhooks(t *testing.T) {
	t.Parallel()
	rc, url := newReceiver(t, 1) // the first delivery fails and is retried
	b := setup(t, Config{WebhookURL: url, WebhookSecret: testWebhookSecret})
	ch := decode[Charge](t, b.charge("k-charge", 1000, "pm_card_visa"))
	eventually(t, "charge.succeeded to be delivered", func() bool { return b.stats().WebhooksSent == 1 })

	part := decode[Refund](t, b.refundPart("k-part", ch.ID, 400))
	eventually(t, "the partial refund's webhooks", func() bool { return b.stats().WebhooksSent == 3 })
	rest := decode[Refund](t, b.refund("k-rest", ch.ID))
	eventually(t, "the last refund's webhooks", func() bool { return b.stats().WebhooksSent == 5 })

	var refunds []Refund
	var charges []Charge
	seen := map[string]bool{}
	for _, d := range rc.got()[1:] { // the failed first attempt is repeated in full
		equal(t, d.contentType, "application/json", "content type")
		verifySignature(t, testWebhookSecret, d.signature, d.body)
		if seen[d.event.ID] {
			continue
		}
		seen[d.event.ID] = true
		if !strings.HasPrefix(d.event.ID, "evt_") || len(d.event.ID) != len("evt_")+24 {
			t.Fatalf("event id %q", d.event.ID)
		}
		if d.event.Created < ch.Created || d.event.Created > time.Now().Unix() {
			t.Fatalf("event created %d is not now", d.event.Created)
		}
		var raw struct {
			Data map[string]json.RawMessage
		}
		noErr(t, json.Unmarshal(d.body, &raw), "decode event body")
		switch d.event.Type {
		case EventRefundSucceeded:
			equal(t, len(raw.Data), 1, "keys in a refund event's data")
			equal(t, raw.Data["refund"] != nil, true, "data.refund present")
			refunds = append(refunds, *d.event.Data.Refund)
		case EventChargeRefunded:
			equal(t, len(raw.Data), 1, "keys in a charge event's data")
			if !strings.Contains(string(raw.Data["charge"]), `"amount_refunded":`) {
				t.Fatalf("charge.refunded charge %s lacks amount_refunded", raw.Data["charge"])
			}
			charges = append(charges, d.event.Data.Charge)
		case EventChargeSucceeded:
		default:
			t.Fatalf("unexpected event type %q", d.event.Type)
		}
	}
	equal(t, len(refunds), 2, "refund.succeeded events")
	equal(t, len(charges), 2, "charge.refunded events")
	equal(t, refunds[0], part, "first refund.succeeded refund")
	equal(t, refunds[1], rest, "second refund.succeeded refund")
	afterPart := ch
	afterPart.AmountRefunded = 400
	equal(t, charges[0], afterPart, "charge.refunded after the partial refund")
	afterRest := ch
	afterRest.AmountRefunded, afterRest.Refunded = 1000, true
	equal(t, charges[1], afterRest, "charge.refunded after the rest")
	equal(t, b.stats(), Stats{ChargeCalls: 1, Charges: 1, RefundCalls: 2, Refunds: 2, WebhooksSent: 5}, "stats")
}

func TestCloseStopsWebhookRetries(t *testing.T) {
	t.Parallel()
	rc, url := newReceiver(t, 1<<30)
	b := setup(t, Config{WebhookURL: url, WebhookSecret: testWebhookSecret})
	equal(t, b.charge("k-hook", 500, "pm_card_visa").status, http.StatusCreated, "charge status")
	eventually(t, "a first delivery attempt", func() bool { return len(rc.got()) >= 1 })

	start := time.Now()
	noErr(t, b.sim.Close(), "Close")

	// The pending retries would take about 35s; Close abandons them at once.
	if waited := time.Since(start); waited > 2*time.Second {
		t.Fatalf("Close took %v: it waited for the retries instead of stopping them", waited)
	}
	equal(t, b.stats().WebhooksSent, 0, "webhooks sent")
}
