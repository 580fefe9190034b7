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
	equal(t, b.refund("k-refund", paid.ID).status, http.StatusCreated, "refund status")
	// Replays create nothing and so announce nothing.
	equal(t, b.charge("k-paid", 500, "pm_card_visa").header.Get("Idempotent-Replayed"), "true", "charge replay")
	equal(t, b.refund("k-refund", paid.ID).header.Get("Idempotent-Replayed"), "true", "refund replay")

	eventually(t, "three webhooks to be delivered", func() bool { return b.stats().WebhooksSent == 3 })
	equal(t, b.sim.hooks.queued.Load(), 3, "events queued")

	byType := map[string]Charge{}
	for _, d := range rc.got() {
		verifySignature(t, testWebhookSecret, d.signature, d.body)
		byType[d.event.Type] = d.event.Data.Charge
	}
	equal(t, len(byType), 3, "distinct event types")
	equal(t, byType[EventChargeSucceeded], paid, "charge.succeeded charge")
	equal(t, byType[EventChargeFailed], declined, "charge.failed charge")
	refunded := paid
	refunded.AmountRefunded, refunded.Refunded = 500, true
	equal(t, byType[EventChargeRefunded], refunded, "charge.refunded charge")
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
