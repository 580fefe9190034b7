package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// applied records the events a receiver applied.
type applied struct {
	mu     sync.Mutex
	events []Event
}

func (a *applied) apply(_ context.Context, ev Event) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, ev)
	return nil
}

func (a *applied) list() []Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Event(nil), a.events...)
}

// signed is a delivery of body signed at ts with secret, as the service
// makes it (here by the library's own signer).
func signed(t *testing.T, secret, id string, ts time.Time, body []byte) *http.Request {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	sig, err := wh.Sign(id, ts, body)
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodPost, "/hooks", bytes.NewReader(body))
	r.Header.Set("webhook-id", id)
	r.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	r.Header.Set("webhook-signature", sig)
	return r
}

// TestReceiverVerifiesAndDedupes: a delivery signed with either of the
// receiver's secrets is applied once however often it comes; a tampered,
// stale or unsigned one is refused with 401 and applies nothing.
func TestReceiverVerifiesAndDedupes(t *testing.T) {
	t.Parallel()
	const oldSecret, newSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
	var a applied
	rc, err := NewReceiver([]string{newSecret, oldSecret}, &Seen{TTL: time.Hour}, a.apply, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	body := []byte(`{"id":"evt_1","type":"payment.succeeded","created_at":"2026-01-02T03:04:05Z","data":{"id":"pay_1","tenant_id":"ten_1"}}`)
	serve := func(r *http.Request) int {
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, r)
		return w.Code
	}
	require.Equal(t, 200, serve(signed(t, oldSecret, "evt_1", time.Now(), body)))
	require.Equal(t, 200, serve(signed(t, newSecret, "evt_1", time.Now(), body)), "a duplicate is answered 200")
	require.Len(t, a.list(), 1, "applied once")
	require.Equal(t, "payment.succeeded", a.list()[0].Type)

	tampered := bytes.Replace(body, []byte("pay_1"), []byte("pay_2"), 1)
	r := httptest.NewRequest(http.MethodPost, "/hooks", bytes.NewReader(tampered))
	r.Header = signed(t, oldSecret, "evt_1", time.Now(), body).Header
	require.Equal(t, 401, serve(r), "tampered body")
	require.Equal(t, 401, serve(signed(t, "whsec_"+"QWxsIHlvdXIgYmFzZSBhcmUgYmVsb25nIHRvIHVzIQ==", "evt_1", time.Now(), body)), "another secret")
	require.Equal(t, 401, serve(signed(t, oldSecret, "evt_1", time.Now().Add(-10*time.Minute), body)), "stale timestamp")
	require.Equal(t, 401, serve(httptest.NewRequest(http.MethodPost, "/hooks", bytes.NewReader(body))), "unsigned")
	other := []byte(`{"id":"evt_3","type":"refund.succeeded","created_at":"2026-01-02T03:04:05Z","data":{"id":"rfd_1"}}`)
	require.Equal(t, 400, serve(signed(t, oldSecret, "evt_other", time.Now(), other)), "the id must be the webhook-id")
	require.Len(t, a.list(), 1)
}

// TestReceiverAgainstTheService runs the receiver against the real
// service (a paymentsvc process, the provider simulator, the outbox relay on
// NATS): the payments service's signing is checked by the official library.
// The receiver's first answer comes after the service's timeout, so the
// service delivers the event again, and the receiver applies it once.
func TestReceiverAgainstTheService(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	sim := proctest.StartSim(t, proctest.SimOptions{})
	pod := proctest.StartPod(t, proctest.PodOptions{DatabaseURL: d.URL, ProviderURL: sim.URL(), Env: []string{
		"OUTBOX_RELAY=on", "NATS_URL=" + testkit.NATSURL(),
		"MERCHANT_WEBHOOK_ALLOW_HTTP=true", "MERCHANT_WEBHOOK_ALLOW_PRIVATE=true",
		"MERCHANT_WEBHOOK_TIMEOUT=1s", "MERCHANT_WEBHOOK_RETRY_SCHEDULE=200ms,200ms,200ms",
	}})
	tenant := proctest.CreateTenant(t, d.URL, "receiver-shop")
	c := proctest.NewClient(pod.URL(), tenant.APIKey)

	addr := testkit.ReservedAddr(t)
	r := c.MustDo(t, http.MethodPost, "/v1/webhook_endpoints", []byte(`{"url":"http://`+addr+`/hooks","event_types":["payment.succeeded"]}`),
		map[string]string{"Content-Type": "application/json"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)
	endpointID, secret := r.Str("id"), r.Str("secret")

	var a applied
	var once sync.Once
	apply := func(ctx context.Context, ev Event) error {
		if err := a.apply(ctx, ev); err != nil {
			return err
		}
		// The first delivery is applied, but its answer is lost: the
		// service gives up on it after its timeout (and hangs up).
		once.Do(func() { <-ctx.Done() })
		return nil
	}
	testkit.Background(t, func(ctx context.Context) error {
		return run(ctx, config{Addr: addr, Secrets: []string{secret}}, apply, testkit.Logger(t))
	})

	pay := c.MustPay(t, "receiver-1", apiclient.Visa("o-receiver-1", 900))
	require.Equal(t, http.StatusCreated, pay.Status, "%s", pay)
	var delivery map[string]any
	testkit.Eventually(t, time.Minute, "the payment's event delivered", func() bool {
		list := c.MustGet(t, "/v1/webhook_endpoints/"+endpointID+"/deliveries")
		require.Equal(t, http.StatusOK, list.Status, "%s", list)
		data := list.JSON["data"].([]any)
		if len(data) != 1 {
			return false
		}
		delivery = data[0].(map[string]any)
		return delivery["status"] == "delivered"
	})
	require.EqualValues(t, 2, delivery["attempts"], "the first answer was too late: delivered again")
	events := a.list()
	require.Len(t, events, 1, "applied once")
	require.Equal(t, delivery["event_id"], events[0].ID)
	require.Equal(t, "payment.succeeded", events[0].Type)
	var data struct {
		ID, TenantID, Status string
		Amount               int64
	}
	require.NoError(t, json.Unmarshal(events[0].Data, &struct {
		ID       *string `json:"id"`
		TenantID *string `json:"tenant_id"`
		Status   *string `json:"status"`
		Amount   *int64  `json:"amount"`
	}{&data.ID, &data.TenantID, &data.Status, &data.Amount}))
	require.Equal(t, pay.Str("id"), data.ID)
	require.Equal(t, tenant.ID, data.TenantID)
	require.Equal(t, "SUCCEEDED", data.Status)
	require.EqualValues(t, 900, data.Amount)
}
