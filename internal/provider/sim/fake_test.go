package sim

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/metrics"

	"github.com/acme/paymentsvc/internal/provider"
)

const testAPIKey = "sk_test"

// fakeProvider is a real HTTP server that answers like the simulator's
// provider API, through a handler each test writes; it records what it saw.
type fakeProvider struct {
	url  string
	stop chan struct{} // closed at cleanup, so that hanging handlers return

	mu     sync.Mutex
	hits   int
	keys   []string
	bodies []chargeBody
}

// handler answers the n-th request (1-based).
type handler func(n int, w http.ResponseWriter, r *http.Request)

func newFake(t *testing.T, h handler) *fakeProvider {
	t.Helper()
	f := &fakeProvider{stop: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.hits++
		n := f.hits
		f.keys = append(f.keys, r.Header.Get("Idempotency-Key"))
		f.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+testAPIKey {
			answerError(w, http.StatusUnauthorized, "unauthorized")
			return
		}
		h(n, w, r)
	}))
	t.Cleanup(func() {
		close(f.stop)
		srv.Close()
	})
	f.url = srv.URL
	return f
}

func (f *fakeProvider) Hits() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits
}

func (f *fakeProvider) Keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.keys...)
}

func (f *fakeProvider) Bodies() []chargeBody {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]chargeBody(nil), f.bodies...)
}

// hang blocks until the client gives up or the test ends.
func (f *fakeProvider) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-f.stop:
	}
}

// answerCharge answers POST /v1/charges like the simulator: 201 with a
// succeeded charge, or 402 with a failed one for pm_card_declined.
func (f *fakeProvider) answerCharge(w http.ResponseWriter, r *http.Request) {
	var body chargeBody
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		answerError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.mu.Unlock()
	key := r.Header.Get("Idempotency-Key")
	ch := provider.Charge{
		ID: "ch_" + key, Amount: body.Amount, Currency: body.Currency, Status: provider.ChargeSucceeded,
		Reference: body.Reference, IdempotencyKey: key, PaymentMethod: body.PaymentMethod, Created: 1700000000,
	}
	if body.PaymentMethod == "pm_card_declined" {
		ch.Status, ch.FailureCode = provider.ChargeFailed, "card_declined"
		answerJSON(w, http.StatusPaymentRequired, map[string]any{
			"error":  map[string]string{"code": "card_declined", "message": "the card was declined"},
			"charge": ch,
		})
		return
	}
	answerJSON(w, http.StatusCreated, ch)
}

func answerError(w http.ResponseWriter, status int, code string) {
	answerJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": code}})
}

func answerJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// testConfig retries generously and never trips the breaker unless a test says so.
func testConfig() provider.Config {
	return provider.Config{CallTimeout: time.Second, RetryBudget: 2 * time.Second, BreakerFailures: 100, BreakerCooldown: 200 * time.Millisecond}
}

// setup starts a fake provider answering with h and a Resilient in front of it.
func setup(t *testing.T, cfg provider.Config, h handler) (*provider.Resilient, *fakeProvider) {
	t.Helper()
	f := newFake(t, h)
	return provider.NewResilient(NewHTTPClient("sim", f.url, testAPIKey, nil), cfg, nil), f
}

func chargeReq(key string) provider.ChargeRequest {
	return provider.ChargeRequest{Amount: 500, Currency: "USD", PaymentMethod: "pm_card_visa", Reference: "pay_" + key, IdempotencyKey: key}
}

func declinedReq(key string) provider.ChargeRequest {
	req := chargeReq(key)
	req.PaymentMethod = "pm_card_declined"
	return req
}

func gaugeValue(t *testing.T, name string) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, metrics.BreakerState.WithLabelValues(name).Write(&m))
	return m.GetGauge().GetValue()
}

// logSignal is a slog.Handler that passes every record to a channel: a
// test signal for "the wrapper is about to wait before a retry".
type logSignal chan logRecord

// logRecord is a record's message and its "wait" attribute, if any.
type logRecord struct {
	msg  string
	wait time.Duration
}

func (s logSignal) Enabled(context.Context, slog.Level) bool { return true }

func (s logSignal) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "wait" {
			rec.wait, _ = time.ParseDuration(a.Value.String())
		}
		return true
	})
	select {
	case s <- rec:
	default:
	}
	return nil
}

func (s logSignal) WithAttrs([]slog.Attr) slog.Handler { return s }

func (s logSignal) WithGroup(string) slog.Handler { return s }

// waitFor receives from ch or fails the test after d.
func waitFor[T any](t *testing.T, ch <-chan T, d time.Duration) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		require.FailNow(t, "timed out waiting for a signal")
	}
	var zero T
	return zero
}
