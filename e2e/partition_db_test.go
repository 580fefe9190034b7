package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testkit"
)

// The timings of the partition tests, from which every bound they check is
// derived (§19): a wait on a silent database ends within DATABASE_TIMEOUT
// + 2 s, requests succeed again DATABASE_TIMEOUT + 5 s after it answers
// again, and a key it left locked is free one IDEMPOTENCY_LOCK_TTL after
// that.
const (
	partitionDBTimeout = 3 * time.Second
	partitionLockTTL   = 5 * time.Second
	// partitionLatency is the provider's latency for the request that is
	// charging when the database goes silent.
	partitionLatency = 500 * time.Millisecond
)

// answerBound is how long after its start (or the partition's, whichever
// is later) a request waiting on the silent database may take to answer.
const answerBound = partitionDBTimeout + 2*time.Second

// timedAnswer is one request's answer and when it started and ended.
type timedAnswer struct {
	r          apiclient.Response
	err        error
	start, end time.Time
}

func (a timedAnswer) took() time.Duration { return a.end.Sub(a.start) }

// timed runs call and times it.
func timed(call func() (apiclient.Response, error)) timedAnswer {
	start := time.Now()
	r, err := call()
	return timedAnswer{r: r, err: err, start: start, end: time.Now()}
}

// partitionStack is a pod whose database connections go through a proxy
// the test blackholes, with the partition timings, authenticating every
// request on the database (AUTH_CACHE_TTL=0s: the authentication, which
// runs before the body is read, must be bounded too).
func partitionStack(t *testing.T) (*opsStack, *testkit.TCPProxy) {
	t.Helper()
	return setupBehindProxy(t, opsOptions{podEnv: []string{
		"DATABASE_TIMEOUT=" + partitionDBTimeout.String(),
		"IDEMPOTENCY_LOCK_TTL=" + partitionLockTTL.String(),
		"PROVIDER_CALL_TIMEOUT=2s", "PROVIDER_RETRY_BUDGET=1s",
		"AUTH_CACHE_TTL=0s",
	}})
}

// While the database stops answering (connections open, nothing comes
// back), every request answers 503 database_unavailable within
// DATABASE_TIMEOUT + 2 s, /readyz answers 503 as fast, /healthz stays 200;
// once it answers again (whether or not the stalled connections ever carry
// another byte) the same pod serves every request again by itself, the
// payment charged during the partition resumes under its key once its lock
// has expired, nothing is lost and nothing is charged twice.
func TestDatabasePartition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		heal func(*testkit.TCPProxy)
	}{
		{"held packets delivered", (*testkit.TCPProxy).Heal},
		{"stalled connections lost for good", (*testkit.TCPProxy).HealNewConnections},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testDatabasePartition(t, tc.heal)
		})
	}
}

func testDatabasePartition(t *testing.T, heal func(*testkit.TCPProxy)) {
	s, proxy := partitionStack(t)
	before := s.client.MustPay(t, "part-before", apiclient.Visa("o-part-before", 100))
	require.Equal(t, http.StatusCreated, before.Status, "%s", before)

	// A payment charging at the provider when the database goes silent: its
	// completion (after the charge, on a context detached from the client)
	// meets the silent database.
	s.sim.SetFaults(t, providersim.Faults{LatencyMS: int(partitionLatency.Milliseconds())})
	charging := make(chan timedAnswer, 1)
	go func() {
		charging <- timed(func() (apiclient.Response, error) {
			return s.client.Pay("part-charging", apiclient.Visa("o-part-charging", 200))
		})
	}()
	testkit.Eventually(t, 30*time.Second, "the charge reaches the provider", func() bool { return s.sim.Stats(t).ChargeCalls >= 2 })
	proxy.Blackhole()
	silentAt := time.Now()

	// Requests that start during the partition: creates, a read, a webhook.
	var (
		mu      sync.Mutex
		during  = map[string]timedAnswer{}
		started sync.WaitGroup
	)
	record := func(name string, call func() (apiclient.Response, error)) {
		started.Go(func() {
			a := timed(call)
			mu.Lock()
			during[name] = a
			mu.Unlock()
		})
	}
	for i := range 3 {
		key := fmt.Sprintf("part-during-%d", i)
		record(key, func() (apiclient.Response, error) { return s.client.Pay(key, apiclient.Visa("o-"+key, 300)) })
	}
	record("GET", func() (apiclient.Response, error) { return s.client.Get("/v1/payments/" + before.Str("id")) })
	record("webhook", func() (apiclient.Response, error) {
		body := opsEvent(testkit.RandomID("evt_"), providersim.EventChargeSucceeded, providersim.Charge{
			ID: before.Str("provider_charge_id"), Amount: 100, Currency: "USD", Status: providersim.StatusSucceeded,
			Reference: before.Str("id"), Created: time.Now().Unix(),
		})
		return s.anon.Do(http.MethodPost, "/v1/webhooks/sim", body, map[string]string{
			"Content-Type": "application/json", "Sim-Signature": providersim.SignatureHeader(s.secret, time.Now().Unix(), body),
		})
	})
	healthz := opsOK(t)(s.anon.Get("/healthz"))
	require.Equal(t, http.StatusOK, healthz.Status, "/healthz stays 200: %s", healthz)

	// /readyz: never slower than the bound, and 503 once the partition is
	// that old.
	time.Sleep(time.Until(silentAt.Add(answerBound)))
	ready := timed(func() (apiclient.Response, error) { return s.anon.Get("/readyz") })
	require.NoError(t, ready.err)
	require.Equal(t, http.StatusServiceUnavailable, ready.r.Status, "/readyz %s into the partition: %s", time.Since(silentAt), ready.r)
	require.Less(t, ready.took(), answerBound, "/readyz took %s", ready.took())

	c := <-charging
	require.NoError(t, c.err)
	requireDatabaseUnavailable(t, c.r, "the payment charging when the database went silent")
	// Its wait on the database began when the provider answered, at most
	// partitionLatency after the partition did.
	require.Less(t, c.end.Sub(silentAt), partitionLatency+answerBound, "the charging payment answered %s after the partition", c.end.Sub(silentAt))
	started.Wait()
	for name, a := range during {
		require.NoError(t, a.err, name)
		requireDatabaseUnavailable(t, a.r, name)
		require.Less(t, a.took(), answerBound, "%s took %s", name, a.took())
	}

	heal(proxy)
	healedAt := time.Now()
	// Every request that starts DATABASE_TIMEOUT + 5 s after the database
	// answers again succeeds, on the first try.
	time.Sleep(time.Until(healedAt.Add(partitionDBTimeout + 5*time.Second)))
	readyAgain := opsOK(t)(s.anon.Get("/readyz"))
	require.Equal(t, http.StatusOK, readyAgain.Status, "/readyz after healing: %s", readyAgain)
	paid := []apiclient.Response{before}
	for i := range 3 {
		r := s.client.MustPay(t, fmt.Sprintf("part-after-%d", i), apiclient.Visa(fmt.Sprintf("o-part-after-%d", i), 400))
		require.Equal(t, http.StatusCreated, r.Status, "a new payment after healing: %s", r)
		paid = append(paid, r)
	}
	get := opsOK(t)(s.client.Get("/v1/payments/" + before.Str("id")))
	require.Equal(t, http.StatusOK, get.Status, "%s", get)

	// Every key answered 503 is free one lock TTL after the later of its
	// answer and the healing: the same keys go through, each charged once.
	freeBy := healedAt.Add(partitionLockTTL + 2*time.Second)
	retries := []struct {
		key    string
		amount int64
	}{{"part-charging", 200}, {"part-during-0", 300}, {"part-during-1", 300}, {"part-during-2", 300}}
	for _, retry := range retries {
		key := retry.key
		var r apiclient.Response
		testkit.Eventually(t, time.Until(freeBy)+time.Second, key+" goes through once its lock has expired", func() bool {
			r = s.client.MustPay(t, key, apiclient.Visa("o-"+key, retry.amount))
			require.Contains(t, []int{http.StatusConflict, http.StatusCreated}, r.Status, "%s: %s", key, r)
			return r.Status == http.StatusCreated
		})
		paid = append(paid, r)
	}
	s.sim.ClearFaults(t)
	for _, p := range paid {
		got := opsOK(t)(s.client.Get("/v1/payments/" + p.Str("id")))
		require.Equal(t, "SUCCEEDED", got.Str("status"), "payment %s answered 201 is kept: %s", p.Str("id"), got)
		require.Equal(t, 1, s.sim.SucceededChargesFor(t, p.Str("id")), "payment %s charged once", p.Str("id"))
	}
	require.EqualValues(t, len(paid), s.sim.Stats(t).Charges, "no other charge")
	var locked int
	require.NoError(t, s.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM idempotency_keys WHERE locked_until > now()`).Scan(&locked))
	require.Zero(t, locked, "no key is still locked")
	require.NotContains(t, s.pod.Logs(), `"msg":"request failed",`, "no 500")
}

// A client that hangs up while its request waits on a silent database is
// logged and counted as 499 client_closed_request, not as a 500.
func TestClientThatHangsUpIsCountedAs499(t *testing.T) {
	t.Parallel()
	s, proxy := setupBehindProxy(t, opsOptions{podEnv: []string{
		"DATABASE_TIMEOUT=" + partitionDBTimeout.String(), "AUTH_CACHE_TTL=1m",
	}})
	warm := opsOK(t)(s.client.Get("/v1/payments?order_id=o-none"))
	require.Equal(t, http.StatusOK, warm.Status, "the tenant is in the pod's cache: %s", warm)
	proxy.Blackhole()
	impatient := *s.client.Client
	impatient.HTTP = &http.Client{Timeout: partitionDBTimeout / 3, Transport: s.client.HTTP.Transport}
	const reqID = "req-hangs-up"
	_, err := impatient.Do(http.MethodPost, "/v1/payments", []byte(`{"order_id":"o-gone","amount":100,"currency":"USD","payment_method":"pm_card_visa"}`),
		map[string]string{"Idempotency-Key": "gone-1", "Content-Type": "application/json", "X-Request-Id": reqID})
	require.Error(t, err, "the client gives up before the pod answers")

	var line opsLogLine
	testkit.Eventually(t, answerBound, "the request is logged", func() bool {
		lines := opsRequestLines(s.pod, reqID)
		if len(lines) == 1 {
			line = lines[0]
		}
		return len(lines) == 1
	})
	require.EqualValues(t, 499, line["status"], "logged as 499: %v", line)
	require.Contains(t, s.pod.Logs(), `"msg":"request ended: client closed request"`)
	require.Contains(t, s.pod.Logs(), `"code":"client_closed_request"`)
	require.NotContains(t, s.pod.Logs(), `"msg":"request failed",`, "not logged as a 500")
	m := s.scrape(t)
	require.EqualValues(t, 1, m.value("paymentsvc_http_requests_total", opsLabels("route", "/v1/payments", "method", "POST", "code", "499")))
	require.Zero(t, m.value("paymentsvc_http_requests_total", opsLabels("route", "/v1/payments", "method", "POST", "code", "500")))
}
