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

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/testkit"
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
	require.True(t, ok && strings.HasPrefix(tPart, "t=") && strings.HasPrefix(v1Part, "v1="), "malformed signature header %q", header)
	ts, err := strconv.ParseInt(strings.TrimPrefix(tPart, "t="), 10, 64)
	require.NoError(t, err, "signature timestamp")
	require.WithinDuration(t, time.Now(), time.Unix(ts, 0), time.Minute, "signature timestamp")
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(ts, 10) + "." + string(body)))
	require.Equal(t, hex.EncodeToString(mac.Sum(nil)), strings.TrimPrefix(v1Part, "v1="), "signature")
	require.Equal(t, header, SignatureHeader(secret, ts, body), "SignatureHeader")
}

func TestSignatureHeader(t *testing.T) {
	t.Parallel()
	// Expected value computed independently: HMAC-SHA256("whsec_test", `1700000000.{"id":"evt_1"}`).
	mac := hmac.New(sha256.New, []byte(testWebhookSecret))
	mac.Write([]byte(`1700000000.{"id":"evt_1"}`))
	want := "t=1700000000,v1=" + hex.EncodeToString(mac.Sum(nil))
	require.Equal(t, want, SignatureHeader(testWebhookSecret, 1700000000, []byte(`{"id":"evt_1"}`)), "header")
}

func TestWebhookRetriedUntilDelivered(t *testing.T) {
	t.Parallel()
	rc, url := newReceiver(t, 2)
	b := setup(t, Config{WebhookURL: url, WebhookSecret: testWebhookSecret})
	ch := decode[Charge](t, b.charge("k-hook", 500, "pm_card_visa"))

	testkit.Eventually(t, 10*time.Second, "the webhook to be delivered", func() bool { return b.stats().WebhooksSent == 1 })

	got := rc.got()
	require.EqualValues(t, 3, len(got), "deliveries (two failed, one accepted)")
	for i, d := range got {
		require.Equal(t, "application/json", d.contentType, "content type")
		verifySignature(t, testWebhookSecret, d.signature, d.body)
		require.Equal(t, got[0].event.ID, d.event.ID, "event id of attempt "+strconv.Itoa(i+1))
		require.Equal(t, string(got[0].body), string(d.body), "body of attempt "+strconv.Itoa(i+1))
	}
	ev := got[0].event
	require.Regexp(t, `^evt_[0-9a-f]{24}$`, ev.ID)
	require.Equal(t, EventChargeSucceeded, ev.Type, "type")
	require.Equal(t, ch, ev.Data.Charge, "charge in event")
	require.Equal(t, Stats{ChargeCalls: 1, Charges: 1, WebhooksSent: 1}, b.stats(), "stats")
}

func TestWebhookEventTypes(t *testing.T) {
	t.Parallel()
	rc, url := newReceiver(t, 0)
	b := setup(t, Config{WebhookURL: url, WebhookSecret: testWebhookSecret})
	paid := decode[Charge](t, b.charge("k-paid", 500, "pm_card_visa"))
	declined := decode[struct{ Charge Charge }](t, b.charge("k-declined", 500, "pm_card_declined")).Charge
	require.Equal(t, http.StatusCreated, b.refund("k-refund", paid.ID).status, "refund status")
	// Replays create nothing and so announce nothing.
	require.Equal(t, "true", b.charge("k-paid", 500, "pm_card_visa").header.Get("Idempotent-Replayed"), "charge replay")
	require.Equal(t, "true", b.refund("k-refund", paid.ID).header.Get("Idempotent-Replayed"), "refund replay")

	testkit.Eventually(t, 10*time.Second, "three webhooks to be delivered", func() bool { return b.stats().WebhooksSent == 3 })
	require.EqualValues(t, 3, b.sim.hooks.queued.Load(), "events queued")

	byType := map[string]Charge{}
	for _, d := range rc.got() {
		verifySignature(t, testWebhookSecret, d.signature, d.body)
		byType[d.event.Type] = d.event.Data.Charge
	}
	require.EqualValues(t, 3, len(byType), "distinct event types")
	require.Equal(t, paid, byType[EventChargeSucceeded], "charge.succeeded charge")
	require.Equal(t, declined, byType[EventChargeFailed], "charge.failed charge")
	refunded := paid
	refunded.Refunded = true
	require.Equal(t, refunded, byType[EventChargeRefunded], "charge.refunded charge")
}

func TestCloseStopsWebhookRetries(t *testing.T) {
	t.Parallel()
	rc, url := newReceiver(t, 1<<30)
	b := setup(t, Config{WebhookURL: url, WebhookSecret: testWebhookSecret})
	require.Equal(t, http.StatusCreated, b.charge("k-hook", 500, "pm_card_visa").status, "charge status")
	testkit.Eventually(t, 10*time.Second, "a first delivery attempt", func() bool { return len(rc.got()) >= 1 })

	start := time.Now()
	require.NoError(t, b.sim.Close(), "Close")

	// The pending retries would take about 35s; Close abandons them at once
	// (10s of slack for a busy machine).
	require.Less(t, time.Since(start), 10*time.Second, "Close waited for the retries instead of stopping them")
	require.EqualValues(t, 0, b.stats().WebhooksSent, "webhooks sent")
}
