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

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// TestWebhookRacesCompletionAcrossPods: the provider's charge.succeeded
// webhook goes to pod B (through a proxy that delays it at random) while pod
// A, which made the charge, runs its completing transaction. Whichever lands
// second must be a no-op: for each of 50 payments exactly one audit
// transition to SUCCEEDED, one outbox row, and the key's stored response 201.
func TestWebhookRacesCompletionAcrossPods(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	rndMu := make(chan struct{}, 1)
	randomDelay := func(max int) time.Duration {
		rndMu <- struct{}{}
		defer func() { <-rndMu }()
		return time.Duration(rnd.IntN(max)) * time.Millisecond
	}
	// Webhooks reach pod B after 0-10 ms.
	var podBURL atomic.Pointer[url.URL]
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := podBURL.Load()
		if u == nil {
			http.Error(w, "pod B not up yet", http.StatusServiceUnavailable)
			return
		}
		time.Sleep(randomDelay(10)) // the randomized delay under test, not a wait
		httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
	}))
	t.Cleanup(hooks.Close)
	sim := proctest.StartSim(t, proctest.SimOptions{Env: []string{"SIM_WEBHOOK_URL=" + hooks.URL + "/v1/webhooks/sim"}})

	// Pod A hears the provider's answer 0-30 ms after the charge exists, so
	// the webhook sometimes lands first and sometimes second.
	simURL, err := url.Parse(sim.URL())
	if err != nil {
		t.Fatal(err)
	}
	toSim := httputil.NewSingleHostReverseProxy(simURL)
	toSim.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method == http.MethodPost {
			time.Sleep(randomDelay(30))
		}
		return nil
	}
	provider := httptest.NewServer(toSim)
	t.Cleanup(provider.Close)

	podA := proctest.StartPod(t, proctest.PodOptions{Name: "pod-a", DatabaseURL: d.URL, ProviderURL: provider.URL})
	podB := proctest.StartPod(t, proctest.PodOptions{Name: "pod-b", DatabaseURL: d.URL, ProviderURL: sim.URL()})
	u, err := url.Parse(podB.URL())
	if err != nil {
		t.Fatal(err)
	}
	podBURL.Store(u)
	tn := proctest.CreateTenant(t, d.URL, "shop")
	client := proctest.NewClient(podA.URL(), tn.APIKey)

	const n = 50
	ids := make([]string, n)
	for i := range n {
		r := client.MustPay(t, fmt.Sprintf("race-%d", i), apiclient.Visa(fmt.Sprintf("o-%d", i), 100+int64(i)))
		if r.Status != http.StatusCreated || r.Str("status") != "SUCCEEDED" {
			t.Fatalf("payment %d: want 201 SUCCEEDED, got %s", i, r)
		}
		ids[i] = r.Str("id")
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, d.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	testkit.Eventually(t, 60*time.Second, "every webhook recorded", func() bool {
		var got int
		_ = conn.QueryRow(ctx, "SELECT count(*) FROM webhook_events").Scan(&got)
		return got == n
	})

	for i, id := range ids {
		var transitions, outbox, code int
		err := conn.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM payment_attempt_events WHERE attempt_id = $1 AND to_status = 'SUCCEEDED'),
			       (SELECT count(*) FROM outbox WHERE payment_id = $1),
			       (SELECT response_code FROM idempotency_keys WHERE attempt_id = $1)`, id).Scan(&transitions, &outbox, &code)
		if err != nil {
			t.Fatal(err)
		}
		if transitions != 1 || outbox != 1 || code != http.StatusCreated {
			t.Fatalf("payment %d (%s): %d transitions to SUCCEEDED, %d outbox rows, stored response %d; want 1, 1, 201",
				i, id, transitions, outbox, code)
		}
	}
	var bySource = map[string]int{}
	rows, err := conn.Query(ctx, "SELECT source, count(*) FROM payment_attempt_events WHERE to_status = 'SUCCEEDED' GROUP BY source")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var src string
		var c int
		if err := rows.Scan(&src, &c); err != nil {
			t.Fatal(err)
		}
		bySource[src] = c
	}
	var anomalies int
	_ = conn.QueryRow(ctx, "SELECT count(*) FROM anomalies").Scan(&anomalies)
	if anomalies != 0 {
		t.Fatalf("agreeing reports recorded %d anomalies", anomalies)
	}
	t.Logf("SUCCEEDED transitions by source: %v", bySource)
	if bySource["api"]+bySource["webhook"] != n {
		t.Fatalf("transitions by source %v do not add up to %d", bySource, n)
	}
	if got := len(sim.Charges(t)); got != n {
		t.Fatalf("simulator holds %d charges, want %d", got, n)
	}
}
