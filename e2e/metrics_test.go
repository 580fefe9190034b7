package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testkit"
)

// metricDelta is one expected change of a sample between two scrapes.
type metricDelta struct {
	name   string
	labels map[string]string
	delta  float64
}

// requireDeltas checks that every sample moved by exactly its delta.
func requireDeltas(t *testing.T, before, after opsMetrics, want []metricDelta) {
	t.Helper()
	for _, w := range want {
		got := after.value(w.name, w.labels) - before.value(w.name, w.labels)
		require.Equal(t, w.delta, got, "%s%v moved by", w.name, w.labels)
	}
}

// TestMetricsCountWhatHappened scrapes /metrics before and after a known
// sequence of requests on a pod of its own and checks that the counters
// moved by exactly what the requests did: HTTP requests and latency,
// idempotency outcomes, attempt transitions by source, provider calls and
// charge outcomes, the breaker gauge, webhook outcomes, and the database
// backlog gauges.
func TestMetricsCountWhatHappened(t *testing.T) {
	t.Parallel()
	s := setupOps(t, opsOptions{podEnv: []string{
		// Two failed calls open the breaker, which then stays open for the
		// rest of the test; a slow charge (5s) fits one call.
		"PROVIDER_CALL_TIMEOUT=10s", "PROVIDER_RETRY_BUDGET=5s", "IDEMPOTENCY_LOCK_TTL=30s",
		"PROVIDER_BREAKER_FAILURES=2", "PROVIDER_BREAKER_COOLDOWN=10m",
	}})
	c := s.client
	body := func(order, pm string, amount int) apiclient.Payment {
		return apiclient.Payment{OrderID: order, Amount: int64(amount), Currency: "USD", PaymentMethod: pm}
	}
	before := s.scrape(t)
	// Gauges are there from the first scrape; labelled counters and
	// histograms appear with their first sample.
	for _, name := range []string{
		"paymentsvc_provider_breaker_state", "paymentsvc_attempts_unresolved",
		"paymentsvc_attempts_oldest_unresolved_age_seconds", "paymentsvc_attempts_needs_review",
		"paymentsvc_attempts_backlog_up", "paymentsvc_outbox_pending",
	} {
		_, ok := before[name]
		require.True(t, ok, "metric family %s present from the first scrape", name)
	}
	require.Equal(t, 0.0, before.value("paymentsvc_provider_breaker_state", opsLabels("provider", "sim")), "closed")
	require.Equal(t, 1.0, before.value("paymentsvc_attempts_backlog_up", nil))

	// created → 201, replayed → 201, reused_mismatch → 422, order_conflict → 409.
	r := c.MustPay(t, "m-1", body("o-1", "pm_card_visa", 500))
	require.Equal(t, 201, r.Status, "%s", r)
	require.True(t, c.MustPay(t, "m-1", body("o-1", "pm_card_visa", 500)).Replayed())
	require.Equal(t, 422, c.MustPay(t, "m-1", body("o-1", "pm_card_visa", 501)).Status)
	require.Equal(t, 409, c.MustPay(t, "m-2", body("o-1", "pm_card_visa", 500)).Status)
	// declined → 402.
	require.Equal(t, 402, c.MustPay(t, "m-3", body("o-3", "pm_card_declined", 500)).Status)
	// in_use → 409 while a slow first request holds the key.
	s.sim.SetFaults(t, providersim.Faults{LatencyMS: 5000})
	calls := s.sim.Stats(t).ChargeCalls
	var (
		wg      sync.WaitGroup
		slow    apiclient.Response
		slowErr error
	)
	wg.Go(func() { slow, slowErr = c.Pay("m-4", body("o-4", "pm_card_visa", 500)) }) // a goroutine must not fail the test
	testkit.Eventually(t, 30*time.Second, "the slow charge reaches the provider", func() bool { return s.sim.Stats(t).ChargeCalls > calls })
	require.Equal(t, 409, c.MustPay(t, "m-4", body("o-4", "pm_card_visa", 500)).Status)
	wg.Wait()
	require.NoError(t, slowErr)
	require.Equal(t, 201, slow.Status, "%s", slow)
	// unknown → 202: two 503s open the breaker, the third try is refused.
	s.sim.SetFaults(t, providersim.Faults{ErrorRate: 1, ErrorStatus: 503})
	unknown := c.MustPay(t, "m-5", body("o-5", "pm_card_visa", 500))
	require.Equal(t, 202, unknown.Status, "%s", unknown)
	mid := s.scrape(t)
	require.Equal(t, 1.0, mid.value("paymentsvc_attempts_unresolved", opsLabels("status", "UNKNOWN")))
	require.GreaterOrEqual(t, mid.value("paymentsvc_attempts_oldest_unresolved_age_seconds", opsLabels("status", "UNKNOWN")), 0.0)
	// breaker open → 503, the attempt stays CREATED and the key is released.
	require.Equal(t, 503, c.MustPay(t, "m-6", body("o-6", "pm_card_visa", 500)).Status)
	s.sim.ClearFaults(t)

	// Webhooks: the UNKNOWN payment's charge succeeded (applied), the same
	// event again (duplicate), a charge we have no payment for
	// (unknown_charge), a forged signature (bad_signature).
	id := unknown.Str("id")
	charge := providersim.Charge{
		ID: "ch_metrics_1", Amount: 500, Currency: "USD", Status: providersim.StatusSucceeded,
		Reference: id, IdempotencyKey: attempts.ProviderKey(id), Created: time.Now().Unix(),
	}
	applied := opsEvent("evt_m_1", providersim.EventChargeSucceeded, charge)
	require.Equal(t, 200, s.postWebhook(t, s.secret, applied, nil).Status)
	require.Equal(t, 200, s.postWebhook(t, s.secret, applied, nil).Status)
	orphan := charge
	orphan.ID, orphan.Reference, orphan.IdempotencyKey = "ch_metrics_2", "", ""
	require.Equal(t, 200, s.postWebhook(t, s.secret, opsEvent("evt_m_2", providersim.EventChargeSucceeded, orphan), nil).Status)
	require.Equal(t, 401, s.postWebhook(t, "whsec_forged", opsEvent("evt_m_3", providersim.EventChargeSucceeded, orphan), nil).Status)
	got := c.MustGet(t, "/v1/payments/"+id)
	require.Equal(t, "SUCCEEDED", got.Str("status"), "%s", got)

	after := s.scrape(t)
	const (
		httpReqs  = "paymentsvc_http_requests_total"
		httpDur   = "paymentsvc_http_request_duration_seconds"
		idem      = "paymentsvc_idempotency_outcomes_total"
		trans     = "paymentsvc_attempt_transitions_total"
		calls_    = "paymentsvc_provider_calls_total"
		callDur   = "paymentsvc_provider_call_duration_seconds"
		outcomes  = "paymentsvc_provider_charge_outcomes_total"
		hookTotal = "paymentsvc_webhook_events_total"
	)
	post := func(code int) map[string]string {
		return opsLabels("route", "/v1/payments", "method", http.MethodPost, "code", fmt.Sprint(code))
	}
	hook := func(code int) map[string]string {
		return opsLabels("route", "/v1/webhooks/{provider}", "method", http.MethodPost, "code", fmt.Sprint(code))
	}
	requireDeltas(t, before, after, []metricDelta{
		{httpReqs, post(201), 3}, // m-1, its replay, m-4
		{httpReqs, post(202), 1},
		{httpReqs, post(402), 1},
		{httpReqs, post(409), 2}, // order conflict, in use
		{httpReqs, post(422), 1},
		{httpReqs, post(503), 1},
		{httpReqs, hook(200), 3},
		{httpReqs, hook(401), 1},
		{httpReqs, opsLabels("route", "/v1/payments/{id}", "method", http.MethodGet, "code", "200"), 1},
		{httpDur, opsLabels("route", "/v1/payments", "method", http.MethodPost), 9},
		{httpDur, opsLabels("route", "/v1/webhooks/{provider}", "method", http.MethodPost), 4},

		{idem, opsLabels("outcome", "created"), 5}, // m-1, m-3, m-4, m-5, m-6
		{idem, opsLabels("outcome", "replayed"), 1},
		{idem, opsLabels("outcome", "reused_mismatch"), 1},
		{idem, opsLabels("outcome", "order_conflict"), 1},
		{idem, opsLabels("outcome", "in_use"), 1},
		{idem, opsLabels("outcome", "resumed"), 0},

		{trans, opsLabels("status", "CREATED", "source", "api"), 5},
		{trans, opsLabels("status", "PENDING", "source", "api"), 4}, // m-6 never called the provider
		{trans, opsLabels("status", "SUCCEEDED", "source", "api"), 2},
		{trans, opsLabels("status", "FAILED", "source", "api"), 1},
		{trans, opsLabels("status", "UNKNOWN", "source", "api"), 1},
		{trans, opsLabels("status", "SUCCEEDED", "source", "webhook"), 1},

		{calls_, opsLabels("op", "charge", "result", "ok"), 2},
		{calls_, opsLabels("op", "charge", "result", "declined"), 1},
		{calls_, opsLabels("op", "charge", "result", "http_5xx"), 2},
		{calls_, opsLabels("op", "charge", "result", "breaker_open"), 1},
		{callDur, opsLabels("op", "charge"), 5}, // refusals make no call
		{outcomes, opsLabels("outcome", "succeeded"), 2},
		{outcomes, opsLabels("outcome", "declined"), 1},
		{outcomes, opsLabels("outcome", "unknown"), 1},

		{hookTotal, opsLabels("outcome", "applied"), 1},
		{hookTotal, opsLabels("outcome", "duplicate"), 1},
		{hookTotal, opsLabels("outcome", "unknown_charge"), 1},
		{hookTotal, opsLabels("outcome", "bad_signature"), 1},
	})
	require.Equal(t, 2.0, after.value("paymentsvc_provider_breaker_state", opsLabels("provider", "sim")), "open")
	require.Equal(t, "HISTOGRAM", after[httpDur].GetType().String())
	hist := after.find(httpDur, opsLabels("route", "/v1/payments", "method", http.MethodPost)).GetHistogram()
	require.NotEmpty(t, hist.GetBucket(), "the latency histogram has buckets")
	require.Greater(t, hist.GetSampleSum(), 0.0)

	// The backlog gauges read the table: m-6 is CREATED, m-5 was resolved by
	// the webhook, nothing is flagged for review.
	require.Equal(t, 1.0, after.value("paymentsvc_attempts_backlog_up", nil))
	require.Equal(t, 1.0, after.value("paymentsvc_attempts_unresolved", opsLabels("status", "CREATED")))
	require.Equal(t, 0.0, after.value("paymentsvc_attempts_unresolved", opsLabels("status", "UNKNOWN")))
	require.Equal(t, 0.0, after.value("paymentsvc_attempts_unresolved", opsLabels("status", "PENDING")))
	require.Equal(t, 0.0, after.value("paymentsvc_attempts_oldest_unresolved_age_seconds", opsLabels("status", "UNKNOWN")))
	require.Equal(t, 0.0, after.value("paymentsvc_attempts_needs_review", nil))
}
