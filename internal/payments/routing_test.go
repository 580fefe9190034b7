package payments_test

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/provider"
	simclient "github.com/acme/paymentsvc/internal/provider/sim"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/routing"
)

// warnings is a slog.Handler that keeps its WARN records.
type warnings struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recs = append(w.recs, r.Clone())
	return nil
}

func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

// about returns the skipped providers of each "not configured" warning
// about payment id.
func (w *warnings) about(id string) [][]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out [][]string
	for _, r := range w.recs {
		var pid string
		var skipped []string
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "payment_id":
				pid = a.Value.String()
			case "skipped":
				skipped, _ = a.Value.Any().([]string)
			}
			return true
		})
		if pid == id && r.Message == "skipping providers that are not configured (PROVIDERS)" {
			out = append(out, skipped)
		}
	}
	return out
}

// A tenant's stored rule may name providers removed from PROVIDERS since
// the PUT checked it. Routing skips them, with one warning per request:
// with another provider left on the route, the payment goes there; with
// none, the request is answered like one whose providers all refused the
// connection (503 provider_unavailable, nothing sent, the key released,
// the payment CREATED), and it never goes to a provider outside its route,
// so the same key pays only once its provider is configured again.
func TestRouteSkipsProvidersNotConfigured(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, routing.Put(b.ctx, b.pool, b.tenantID, []routing.Rule{
		{Currency: "USD", Providers: []string{"gone", "sim"}},
		{Providers: []string{"gone", "also_gone"}},
	}))
	logs := &warnings{}
	svc, err := payments.NewRouted(b.pool, []payments.Provider{b.prov}, timings, slog.New(logs))
	require.NoError(t, err)

	in := b.input("key-usd", "order-usd")
	r, err := svc.Create(b.ctx, in)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	a := b.get(r.PaymentID)
	require.Equal(t, "sim", a.ProviderName())
	require.Equal(t, []string{"gone", "sim"}, a.Route, "the route as the rule has it")
	require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending, attempts.Succeeded}, b.history(a.ID))
	require.Equal(t, [][]string{{"gone"}}, logs.about(a.ID))

	in = b.input("key-eur", "order-eur")
	in.Currency = "EUR"
	calls := b.sim.Stats(t).ChargeCalls
	for range 2 { // the first request, then its retry with the same key
		_, err = svc.Create(b.ctx, in)
		a = b.requireUnavailable(err, in, attempts.Created)
		require.Nil(t, a.Provider)
	}
	require.Equal(t, []string{"gone", "also_gone"}, a.Route)
	require.Equal(t, []attempts.Status{attempts.Created}, b.history(a.ID))
	require.Equal(t, providersim.Stats{ChargeCalls: calls, Charges: 1}, b.sim.Stats(t), "nothing sent")
	require.Equal(t, [][]string{{"gone", "also_gone"}, {"gone", "also_gone"}}, logs.about(a.ID), "one warning per request")

	// Configured again (here: another name for the same simulator), the
	// same key pays there.
	gone := provider.NewResilient(simclient.NewHTTPClient("gone", b.sim.URL(), simAPIKey, &http.Client{}), providerConfig, nil)
	back, err := payments.NewRouted(b.pool, []payments.Provider{b.prov, gone}, timings, nil)
	require.NoError(t, err)
	r, err = back.Create(b.ctx, in)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	require.Equal(t, a.ID, r.PaymentID)
	require.Equal(t, "gone", b.get(a.ID).ProviderName())
	require.Equal(t, providersim.Stats{ChargeCalls: calls + 1, Charges: 2}, b.sim.Stats(t))
}
