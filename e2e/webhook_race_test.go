package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// TestWebhookRacesCompletionAcrossPods: the provider's charge.succeeded
// webhook goes to pod B (through a proxy that delays it) while pod A, which
// made the charge, runs its completing transaction (its provider's answer
// delayed by another proxy). Whichever lands second must be a no-op: for
// each payment exactly one audit transition to SUCCEEDED, one outbox row,
// and the key's stored response 201. Both orders must occur over the
// payments, or the test proved nothing about one of them: every third
// payment is a free race (random delays on both sides), the others give
// one side a head start that grows with the rounds, and payments go on
// (up to maxRounds) until each side has won at least once.
func TestWebhookRacesCompletionAcrossPods(t *testing.T) {
	t.Parallel()
	const minRounds, maxRounds = 50, 150
	var round atomic.Int64
	// delay is how long the proxy in front of side ("api" or "webhook")
	// holds a message in the current round; the delays under test, not waits.
	delay := func(side string) time.Duration {
		r := int(round.Load())
		head := time.Duration(50+5*r) * time.Millisecond
		switch r % 3 {
		case 0:
			if side == "api" {
				return rand.N(30 * time.Millisecond)
			}
			return rand.N(10 * time.Millisecond)
		case 1: // the API first
			if side == "webhook" {
				return head
			}
		default: // the webhook first
			if side == "api" {
				return head
			}
		}
		return 0
	}

	d := testdb.New(t)
	var podBURL atomic.Pointer[url.URL]
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := podBURL.Load()
		if u == nil {
			http.Error(w, "pod B not up yet", http.StatusServiceUnavailable)
			return
		}
		time.Sleep(delay("webhook"))
		httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
	}))
	t.Cleanup(hooks.Close)
	sim := proctest.StartSim(t, proctest.SimOptions{Env: []string{"SIM_WEBHOOK_URL=" + hooks.URL + "/v1/webhooks/sim"}})

	// Pod A hears the provider's answer to a charge only after the delay.
	simURL, err := url.Parse(sim.URL())
	require.NoError(t, err)
	toSim := httputil.NewSingleHostReverseProxy(simURL)
	toSim.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method == http.MethodPost {
			time.Sleep(delay("api"))
		}
		return nil
	}
	provider := httptest.NewServer(toSim)
	t.Cleanup(provider.Close)

	podA := proctest.StartPod(t, proctest.PodOptions{Name: "pod-a", DatabaseURL: d.URL, ProviderURL: provider.URL})
	podB := proctest.StartPod(t, proctest.PodOptions{Name: "pod-b", DatabaseURL: d.URL, ProviderURL: sim.URL()})
	u, err := url.Parse(podB.URL())
	require.NoError(t, err)
	podBURL.Store(u)
	tn := proctest.CreateTenant(t, d.URL, "shop")
	client := proctest.NewClient(podA.URL(), tn.APIKey)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, d.URL)
	require.NoError(t, err)
	defer conn.Close(ctx)

	var ids []string
	wins := map[string]int{}
	for r := 0; r < maxRounds && (r < minRounds || wins["api"] == 0 || wins["webhook"] == 0); r++ {
		round.Store(int64(r))
		resp := client.MustPay(t, fmt.Sprintf("race-%d", r), apiclient.Visa(fmt.Sprintf("o-%d", r), 100+int64(r)))
		require.Equal(t, http.StatusCreated, resp.Status, "payment %d: %s", r, resp)
		require.Equal(t, "SUCCEEDED", resp.Str("status"), "payment %d", r)
		id := resp.Str("id")
		ids = append(ids, id)
		// The answer came after the transition to SUCCEEDED committed, by
		// pod A's completion or by the webhook: that one won the round.
		var winner string
		require.NoError(t, conn.QueryRow(ctx,
			"SELECT source FROM payment_attempt_events WHERE attempt_id = $1 AND to_status = 'SUCCEEDED'", id).Scan(&winner))
		wins[winner]++
	}
	n := len(ids)
	t.Logf("SUCCEEDED transitions by source over %d payments: %v", n, wins)

	testkit.Eventually(t, 60*time.Second, "every webhook recorded", func() bool {
		var got int
		require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM webhook_events").Scan(&got))
		return got == n
	})
	for i, id := range ids {
		var transitions, outbox, code int
		require.NoError(t, conn.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM payment_attempt_events WHERE attempt_id = $1 AND to_status = 'SUCCEEDED'),
			       (SELECT count(*) FROM outbox WHERE payment_id = $1),
			       (SELECT response_code FROM idempotency_keys WHERE attempt_id = $1)`, id).Scan(&transitions, &outbox, &code))
		require.Equal(t, 1, transitions, "payment %d (%s): transitions to SUCCEEDED", i, id)
		require.Equal(t, 1, outbox, "payment %d (%s): outbox rows", i, id)
		require.Equal(t, http.StatusCreated, code, "payment %d (%s): stored response", i, id)
	}
	var anomalies int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM anomalies").Scan(&anomalies))
	require.Zero(t, anomalies, "agreeing reports record no anomaly")
	require.Equal(t, n, wins["api"]+wins["webhook"], "transitions by source %v", wins)
	require.Positive(t, wins["api"], "pod A's completion never landed first")
	require.Positive(t, wins["webhook"], "the webhook never landed first")
	require.Len(t, sim.Charges(t), n, "one charge per payment")
}
