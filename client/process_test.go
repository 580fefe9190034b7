package client_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/client"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// These tests run the client against the real binaries: a provider
// simulator, one or two paymentsvc pods on a fresh database.

// shortTimings are pod settings that make lock expiry and provider retries
// take seconds (the service refuses a lock TTL not longer than budget + call
// timeout); extra settings come last and override them.
func shortTimings(lockTTL time.Duration, extra ...string) []string {
	return append([]string{
		"IDEMPOTENCY_LOCK_TTL=" + lockTTL.String(),
		"PROVIDER_CALL_TIMEOUT=500ms",
		"PROVIDER_RETRY_BUDGET=1500ms",
		"PROVIDER_BREAKER_COOLDOWN=1s",
	}, extra...)
}

// stack is a simulator and a tenant on a fresh database; each test adds its pods.
type stack struct {
	db     *testdb.DB
	sim    *proctest.Sim
	tenant proctest.Tenant
}

func newStack(t *testing.T, simEnv ...string) *stack {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the real binaries; skipped with -short")
	}
	d := testdb.New(t)
	return &stack{
		db:     d,
		sim:    proctest.StartSim(t, proctest.SimOptions{Env: simEnv}),
		tenant: proctest.CreateTenant(t, d.URL, "shop"),
	}
}

func (s *stack) pod(t *testing.T, name string, env ...string) *proctest.Process {
	t.Helper()
	return proctest.StartPod(t, proctest.PodOptions{Name: name, DatabaseURL: s.db.URL, ProviderURL: s.sim.URL(), Env: env})
}

// client returns a client of urls as the stack's tenant, with cfg's
// timings, whose every try is recorded.
func (s *stack) client(t *testing.T, cfg client.Config, urls ...string) (*client.Client, *recorder) {
	t.Helper()
	rec := &recorder{next: http.DefaultTransport.(*http.Transport).Clone()}
	cfg.URLs, cfg.APIKey, cfg.HTTPClient = urls, s.tenant.APIKey, &http.Client{Transport: rec}
	c, err := client.New(cfg)
	require.NoError(t, err)
	t.Cleanup(c.CloseIdleConnections)
	return c, rec
}

// keysStored lists the tenant's idempotency keys as the service recorded them.
func (s *stack) keysStored(t *testing.T) []string {
	t.Helper()
	return testdb.Strings[string](context.Background(), t, s.db.Pool, "SELECT key FROM idempotency_keys WHERE tenant_id = $1", s.tenant.ID)
}

// requireOneKey requires that the client sent only key, on every try, and
// that the service holds that one key for the tenant.
func (s *stack) requireOneKey(t *testing.T, rec *recorder, key string) {
	t.Helper()
	require.Equal(t, []string{key}, rec.keys(), "the keys the client sent")
	require.Equal(t, []string{key}, s.keysStored(t), "the keys the service stored")
}

// try is one HTTP request the client made, as its transport saw it.
type try struct {
	host, method, path, key string
	status                  int // 0: no answer
	retryAfter              int
	replayed                bool
	err                     error
	sent, answered          time.Time
}

// recorder is the client's transport in these tests: it records every try.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	log  []try
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	tr := try{host: req.URL.Host, method: req.Method, path: req.URL.Path, key: req.Header.Get("Idempotency-Key"), sent: time.Now()}
	resp, err := r.next.RoundTrip(req)
	tr.answered, tr.err = time.Now(), err
	if resp != nil {
		tr.status = resp.StatusCode
		tr.retryAfter, _ = strconv.Atoi(resp.Header.Get("Retry-After"))
		tr.replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	}
	r.mu.Lock()
	r.log = append(r.log, tr)
	r.mu.Unlock()
	return resp, err
}

func (r *recorder) tries() []try {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]try(nil), r.log...)
}

// keys are the distinct Idempotency-Keys sent, "" excluded.
func (r *recorder) keys() []string {
	var out []string
	seen := map[string]bool{}
	for _, tr := range r.tries() {
		if tr.key != "" && !seen[tr.key] {
			seen[tr.key] = true
			out = append(out, tr.key)
		}
	}
	return out
}

func (r *recorder) statuses() []int {
	var out []int
	for _, tr := range r.tries() {
		out = append(out, tr.status)
	}
	return out
}

// sawStatus reports whether some try was answered status.
func (r *recorder) sawStatus(status int) bool {
	for _, tr := range r.tries() {
		if tr.status == status {
			return true
		}
	}
	return false
}

// requireRetryAfterHonoured requires every try that follows an answer with a
// Retry-After to have waited it out.
func requireRetryAfterHonoured(t *testing.T, tries []try) {
	t.Helper()
	for i := 1; i < len(tries); i++ {
		prev := tries[i-1]
		if prev.retryAfter > 0 {
			require.GreaterOrEqual(t, tries[i].sent.Sub(prev.answered), time.Duration(prev.retryAfter)*time.Second,
				"try %d came too soon after a %d with Retry-After %d", i, prev.status, prev.retryAfter)
		}
	}
}

func processConfig() client.Config {
	return client.Config{TryTimeout: 10 * time.Second, Timeout: 90 * time.Second, MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second}
}

// The happy path through every endpoint: a payment, its replay, reads,
// lists, a refund and routing rules.
func TestProcessHappyPath(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pod := s.pod(t, "paymentsvc")
	c, rec := s.client(t, processConfig(), pod.URL())
	ctx := context.Background()
	key := client.NewKey()
	req := client.CreatePaymentRequest{OrderID: "o-1", Amount: 500, Currency: "USD", PaymentMethod: "pm_card_visa",
		Description: "Order o-1", Metadata: map[string]string{"cart": "c-42"}}

	p, err := c.CreatePayment(ctx, key, req)
	require.NoError(t, err)
	require.Equal(t, client.StatusSucceeded, p.Status)
	require.Equal(t, "o-1", p.OrderID)
	require.Equal(t, int64(500), p.Amount)
	require.NotNil(t, p.Provider)
	require.Equal(t, "sim", *p.Provider)
	require.NotNil(t, p.ProviderChargeID)
	require.Nil(t, p.FailureCode)
	require.Equal(t, "Order o-1", p.Description)
	require.Equal(t, map[string]string{"cart": "c-42"}, p.Metadata)
	require.Equal(t, int64(500), p.AmountRefundable)
	require.False(t, p.CreatedAt.IsZero())

	again, err := c.CreatePayment(ctx, key, req)
	require.NoError(t, err)
	require.Equal(t, p, again, "the same key and request: the stored answer")
	require.True(t, rec.tries()[1].replayed)
	s.requireOneKey(t, rec, key)
	require.Equal(t, 1, s.sim.SucceededChargesFor(t, p.ID))

	got, err := c.GetPayment(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, p, got)
	synced, err := c.SyncPayment(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, p, synced)
	var listed []*client.Payment
	for lp, err := range c.ListPayments(ctx, client.ListPaymentsParams{OrderID: "o-1"}) {
		require.NoError(t, err)
		listed = append(listed, lp)
	}
	require.Equal(t, []*client.Payment{p}, listed)

	refundKey := client.NewKey()
	r, err := c.CreateRefund(ctx, p.ID, refundKey, client.CreateRefundRequest{Amount: new(int64(200)), Reason: client.ReasonRequestedByCustomer})
	require.NoError(t, err)
	require.Equal(t, client.StatusSucceeded, r.Status)
	require.Equal(t, p.ID, r.PaymentID)
	require.Equal(t, int64(200), r.Amount)
	require.Equal(t, client.ReasonRequestedByCustomer, *r.Reason)
	require.Equal(t, map[string]string{}, r.Metadata)
	gotRefund, err := c.GetRefund(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, r.ID, gotRefund.ID)
	syncedRefund, err := c.SyncRefund(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, client.StatusSucceeded, syncedRefund.Status)
	var refunds []string
	for lr, err := range c.ListRefunds(ctx, p.ID, client.ListRefundsParams{}) {
		require.NoError(t, err)
		refunds = append(refunds, lr.ID)
	}
	require.Equal(t, []string{r.ID}, refunds)
	after, err := c.GetPayment(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, int64(200), after.AmountRefunded)
	require.Equal(t, int64(300), after.AmountRefundable)

	rules := client.Routing{Rules: []client.RoutingRule{{Currency: "EUR", Providers: []string{"sim"}}, {Providers: []string{"sim"}}}}
	stored, err := c.PutRouting(ctx, rules)
	require.NoError(t, err)
	require.Equal(t, &rules, stored)
	read, err := c.GetRouting(ctx)
	require.NoError(t, err)
	require.Equal(t, &rules, read)
	cleared, err := c.PutRouting(ctx, client.Routing{})
	require.NoError(t, err)
	require.Empty(t, cleared.Rules)

	_, err = c.PutRouting(ctx, client.Routing{Rules: []client.RoutingRule{{Providers: []string{"nope"}}}})
	require.Equal(t, client.CodeInvalidRequest, client.CodeOf(err), "%v", err)
	_, err = c.GetPayment(ctx, "pay_missing")
	require.Equal(t, client.CodePaymentNotFound, client.CodeOf(err), "%v", err)
	_, err = c.GetRefund(ctx, "rfd_missing")
	require.Equal(t, client.CodeRefundNotFound, client.CodeOf(err), "%v", err)
	_, err = c.CreatePayment(ctx, client.NewKey(), req)
	prob, ok := errors.AsType[*client.Problem](err)
	require.True(t, ok, "another key for a paid order: %v", err)
	require.Equal(t, client.CodeOrderAlreadyHasPayment, prob.Code)
	require.Equal(t, p.ID, prob.PaymentID)

	bad, err := client.New(client.Config{URLs: []string{pod.URL()}, APIKey: "sk_wrong"})
	require.NoError(t, err)
	_, err = bad.GetPayment(ctx, p.ID)
	require.Equal(t, client.CodeUnauthorized, client.CodeOf(err), "%v", err)
}

// A declined card is FAILED, returned without an error and never retried.
func TestProcessDecline(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pod := s.pod(t, "paymentsvc")
	c, rec := s.client(t, processConfig(), pod.URL())
	key := client.NewKey()
	p, err := c.CreatePayment(context.Background(), key, client.CreatePaymentRequest{
		OrderID: "o-declined", Amount: 500, Currency: "USD", PaymentMethod: "pm_card_declined"})
	require.NoError(t, err)
	require.Equal(t, client.StatusFailed, p.Status)
	require.Equal(t, "card_declined", *p.FailureCode)
	require.Equal(t, []int{402}, rec.statuses())
	s.requireOneKey(t, rec, key)
}

// The provider takes 800ms; the client gives each try 300ms. The first try
// times out while the service carries on, the retry finds the key in use
// (409) and waits its Retry-After, and the next one replays the stored
// 201: one charge.
func TestProcessSlowProviderTryTimeoutThenReplay(t *testing.T) {
	t.Parallel()
	s := newStack(t, "SIM_LATENCY=800ms")
	// The service's own call to the provider has room to spare, so that it
	// makes one call however loaded the machine is.
	pod := s.pod(t, "paymentsvc", shortTimings(4*time.Second, "PROVIDER_CALL_TIMEOUT=2s", "PROVIDER_RETRY_BUDGET=1s")...)
	cfg := processConfig()
	cfg.TryTimeout = 300 * time.Millisecond
	c, rec := s.client(t, cfg, pod.URL())
	key := client.NewKey()

	p, err := c.CreatePayment(context.Background(), key, client.CreatePaymentRequest{OrderID: "o-slow", Amount: 500, Currency: "USD", PaymentMethod: "pm_card_visa"})
	require.NoError(t, err)
	require.Equal(t, client.StatusSucceeded, p.Status)

	tries := rec.tries()
	require.Error(t, tries[0].err, "the first try timed out")
	last := tries[len(tries)-1]
	require.Equal(t, 201, last.status)
	require.True(t, last.replayed, "the answer of the first try, stored")
	require.True(t, rec.sawStatus(409), "a retry found the first try still running: %v", rec.statuses())
	requireRetryAfterHonoured(t, tries)
	st := s.sim.Stats(t)
	require.Equal(t, int64(1), st.ChargeCalls, "one call reached the provider")
	require.Equal(t, int64(1), st.Charges)
	s.requireOneKey(t, rec, key)
}

// While the first try holds the key, a 409 idempotency_key_in_use is waited
// out for its whole Retry-After, however short the backoff: the client does
// not hammer the service.
func TestProcessInUseRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	s := newStack(t, "SIM_LATENCY=2500ms")
	pod := s.pod(t, "paymentsvc", shortTimings(6*time.Second, "PROVIDER_CALL_TIMEOUT=4s", "PROVIDER_RETRY_BUDGET=1s")...)
	cfg := processConfig()
	// The first try must hold the key before it gives up: on a loaded
	// machine the acquisition alone took more than 200ms, and a first try
	// that died inside it left the key locked with no call running (a second
	// 409). A second is room for that, and still far less than the 2.5s call.
	cfg.TryTimeout, cfg.MinBackoff, cfg.MaxBackoff = time.Second, 10*time.Millisecond, 20*time.Millisecond
	c, rec := s.client(t, cfg, pod.URL())
	key := client.NewKey()

	p, err := c.CreatePayment(context.Background(), key, client.CreatePaymentRequest{OrderID: "o-busy", Amount: 500, Currency: "USD", PaymentMethod: "pm_card_visa"})
	require.NoError(t, err)
	require.Equal(t, client.StatusSucceeded, p.Status)
	tries := rec.tries()
	conflicts := 0
	for _, tr := range tries {
		if tr.status == 409 {
			conflicts++
			require.GreaterOrEqual(t, tr.retryAfter, 1)
		}
	}
	require.Equal(t, 1, conflicts, "one 409, then its Retry-After outlasted the first try: %v", rec.statuses())
	require.LessOrEqual(t, len(tries), 6, "a few tries, not a stream of them: %v", rec.statuses())
	requireRetryAfterHonoured(t, tries)
	require.Equal(t, int64(1), s.sim.Stats(t).ChargeCalls)
	s.requireOneKey(t, rec, key)
}

// Seed scenario 4 through the client with two base URLs: pod A dies after
// the provider charged; the client moves on to pod B, waits out the dead
// owner's lock (409, Retry-After) and gets the one charge when pod B takes
// the key over.
func TestProcessPodDiesAfterProviderCall(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	podA := s.pod(t, "pod-a", shortTimings(3*time.Second, "PAYMENTSVC_FAILPOINT=after_provider_call")...)
	podB := s.pod(t, "pod-b", shortTimings(3*time.Second)...)
	c, rec := s.client(t, processConfig(), podA.URL(), podB.URL())
	key := client.NewKey()

	p, err := c.CreatePayment(context.Background(), key, client.CreatePaymentRequest{OrderID: "o-crash", Amount: 500, Currency: "USD", PaymentMethod: "pm_card_visa"})
	require.NoError(t, err)
	require.Equal(t, client.StatusSucceeded, p.Status)
	testkit.Eventually(t, 10*time.Second, "pod A died at the failpoint", podA.Exited)
	require.Equal(t, 137, podA.ExitCode())

	tries := rec.tries()
	require.Equal(t, podA.Addr(), tries[0].host, "the first try went to the first URL")
	require.Error(t, tries[0].err, "pod A died without answering")
	require.Equal(t, podB.Addr(), tries[1].host, "the retry went to the next URL")
	requireRetryAfterHonoured(t, tries)
	charges := s.sim.Charges(t)
	require.Len(t, charges, 1, "exactly one charge")
	require.Equal(t, *p.ProviderChargeID, charges[0].ID)
	s.requireOneKey(t, rec, key)
}

// The provider loses its answers: the service answers 202 UNKNOWN and the
// client keeps resuming with the same key; once the provider answers again
// the payment is resumed to SUCCEEDED with the charge made at first.
func TestProcess202ResumedToFinal(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pod := s.pod(t, "paymentsvc", shortTimings(3*time.Second)...)
	c, rec := s.client(t, processConfig(), pod.URL())
	key := client.NewKey()
	s.sim.SetFaults(t, providersim.Faults{DropAfterCommit: true})

	type result struct {
		p   *client.Payment
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, err := c.CreatePayment(context.Background(), key, client.CreatePaymentRequest{OrderID: "o-lost", Amount: 500, Currency: "USD", PaymentMethod: "pm_card_visa"})
		done <- result{p, err}
	}()
	testkit.Eventually(t, time.Minute, "the service answers 202", func() bool { return rec.sawStatus(202) })
	s.sim.ClearFaults(t)
	var res result
	select {
	case res = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the payment was not resumed within 2 minutes")
	}
	require.NoError(t, res.err)
	require.Equal(t, client.StatusSucceeded, res.p.Status)
	require.Len(t, s.sim.Charges(t), 1, "exactly one charge")
	requireRetryAfterHonoured(t, rec.tries())
	s.requireOneKey(t, rec, key)
}

// The provider never answers: at the deadline the client returns a
// *NotFinalError with the key and the payment UNKNOWN. Resumed later with
// that key, once the provider is back, it is the same payment, charged once.
func TestProcessDeadlineCarriesKeyAndLastState(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pod := s.pod(t, "paymentsvc", shortTimings(3*time.Second)...)
	cfg := processConfig()
	cfg.Timeout = 6 * time.Second
	c, rec := s.client(t, cfg, pod.URL())
	key := client.NewKey()
	req := client.CreatePaymentRequest{OrderID: "o-deadline", Amount: 500, Currency: "USD", PaymentMethod: "pm_card_visa"}
	s.sim.SetFaults(t, providersim.Faults{DropAfterCommit: true})

	_, err := c.CreatePayment(context.Background(), key, req)
	nf, ok := errors.AsType[*client.NotFinalError](err)
	require.True(t, ok, "want a *NotFinalError, got %v", err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, key, nf.IdempotencyKey)
	require.NotNil(t, nf.Payment, "the 202's payment")
	require.Equal(t, client.StatusUnknown, nf.Payment.Status)
	require.Equal(t, "o-deadline", nf.Payment.OrderID)
	require.GreaterOrEqual(t, nf.Tries, 1)

	s.sim.ClearFaults(t)
	p, err := c.CreatePayment(context.Background(), nf.IdempotencyKey, req)
	require.NoError(t, err)
	require.Equal(t, client.StatusSucceeded, p.Status)
	require.Equal(t, nf.Payment.ID, p.ID, "the same payment, resumed")
	require.Len(t, s.sim.Charges(t), 1, "exactly one charge")
	s.requireOneKey(t, rec, key)
}
