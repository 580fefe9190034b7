package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// twoProviders is a database, two simulators (providers sim_a and sim_b) on
// fixed ports with persisted state, so that a killed one comes back with its
// charges where the pods expect it, and two tenants.
type twoProviders struct {
	db     *testdb.DB
	a, b   *proctest.Sim
	t1, t2 proctest.Tenant
}

func newTwoProviders(t *testing.T) *twoProviders {
	t.Helper()
	s := &twoProviders{db: testdb.New(t)}
	sim := func(name string) *proctest.Sim {
		return proctest.StartSim(t, proctest.SimOptions{Env: []string{
			"SIM_ADDR=" + testkit.ReservedAddr(t),
			"SIM_STATE_FILE=" + filepath.Join(t.TempDir(), name+".json"),
		}})
	}
	s.a, s.b = sim("a"), sim("b")
	s.t1 = proctest.CreateTenant(t, s.db.URL, "shop-1")
	s.t2 = proctest.CreateTenant(t, s.db.URL, "shop-2")
	return s
}

// providers is the PROVIDERS setting: sim_a first.
func (s *twoProviders) providers() string {
	return "PROVIDERS=sim_a=" + s.a.URL() + ",sim_b=" + s.b.URL()
}

// pod starts a pod routing to both; extra settings come last.
func (s *twoProviders) pod(t *testing.T, name string, extra ...string) *proctest.Process {
	t.Helper()
	env := append(shortTimings(shortLockTTL, s.providers()), extra...)
	return proctest.StartPod(t, proctest.PodOptions{Name: name, DatabaseURL: s.db.URL, ProviderURL: s.a.URL(), Env: env})
}

// chargesFor counts the succeeded charges of payment id at each simulator.
func (s *twoProviders) chargesFor(t *testing.T, id string) (a, b int) {
	t.Helper()
	return s.a.SucceededChargesFor(t, id), s.b.SucceededChargesFor(t, id)
}

func putRouting(t *testing.T, c *proctest.Client, body string) apiclient.Response {
	t.Helper()
	return c.MustDo(t, http.MethodPut, "/v1/routing", []byte(body), map[string]string{"Content-Type": "application/json"})
}

// TestRoutingDefaultOrderAndRules: without rules a payment goes to the first
// provider of PROVIDERS; a tenant's currency rule sends its payments of that
// currency elsewhere, and only that tenant's; invalid rules are refused and
// change nothing.
func TestRoutingDefaultOrderAndRules(t *testing.T) {
	t.Parallel()
	s := newTwoProviders(t)
	p := s.pod(t, "pod")
	c1, c2 := proctest.NewClient(p.URL(), s.t1.APIKey), proctest.NewClient(p.URL(), s.t2.APIKey)

	r := c1.MustGet(t, "/v1/routing")
	require.Equal(t, 200, r.Status, "%s", r)
	require.JSONEq(t, `{"rules":[]}`, string(r.Raw))

	pay := func(c *proctest.Client, key, currency string) apiclient.Response {
		t.Helper()
		r := c.MustPay(t, key, apiclient.Payment{OrderID: key, Amount: 500, Currency: currency, PaymentMethod: "pm_card_visa"})
		require.Equal(t, 201, r.Status, "%s", r)
		return r
	}
	usd := pay(c1, "k-usd-1", "USD")
	require.Equal(t, "sim_a", usd.Str("provider"), "the default order")
	a, b := s.chargesFor(t, usd.Str("id"))
	require.Equal(t, [2]int{1, 0}, [2]int{a, b})

	rules := `{"rules":[{"currency":"EUR","providers":["sim_b","sim_a"]},{"providers":["sim_a","sim_b"]}]}`
	r = putRouting(t, c1, rules)
	require.Equal(t, 200, r.Status, "%s", r)
	require.JSONEq(t, rules, string(r.Raw))
	require.JSONEq(t, rules, string(c1.MustGet(t, "/v1/routing").Raw))

	eur := pay(c1, "k-eur-1", "EUR")
	require.Equal(t, "sim_b", eur.Str("provider"), "the EUR rule")
	a, b = s.chargesFor(t, eur.Str("id"))
	require.Equal(t, [2]int{0, 1}, [2]int{a, b})
	require.Equal(t, "sim_a", pay(c1, "k-usd-2", "USD").Str("provider"), "the catch-all rule")
	require.Equal(t, "sim_a", pay(c2, "k-eur-2", "EUR").Str("provider"), "another tenant's rules are its own")
	require.JSONEq(t, `{"rules":[]}`, string(c2.MustGet(t, "/v1/routing").Raw))

	for _, bad := range []string{
		`{"rules":[{"providers":["sim_c"]}]}`,
		`{"rules":[{"currency":"EUR","providers":[]}]}`,
		`{"rules":[{"providers":["sim_a"]},{"currency":"EUR","providers":["sim_b"]}]}`,
		`{"rules":[{"currency":"EUR","providers":["sim_a"]},{"currency":"EUR","providers":["sim_b"]}]}`,
		`{"rules":[{"currency":"eur","providers":["sim_a"]}]}`,
		`{"rules":[{"currency":"AAX","providers":["sim_a"]}]}`, // not an ISO 4217 code
		`{"rules":[{"providers":["sim_a","sim_a"]}]}`,
		`{}`,
	} {
		require.NoError(t, putRouting(t, c1, bad).CheckProblem(400, "invalid_request"), bad)
	}
	require.JSONEq(t, rules, string(c1.MustGet(t, "/v1/routing").Raw), "refused rules changed nothing")
	require.NoError(t, proctest.NewClient(p.URL(), "").MustGet(t, "/v1/routing").CheckProblem(401, "unauthorized"))

	require.JSONEq(t, `{"rules":[]}`, string(putRouting(t, c1, `{"rules":[]}`).Raw))
	require.Equal(t, "sim_a", pay(c1, "k-eur-3", "EUR").Str("provider"), "rules cleared: the default order")
}

// TestFailoverOnlyWhenNothingWasSent: with provider A down (connection
// refused: provably not sent) a payment goes to B, once; with both down the
// answer is 503, nothing is charged anywhere and the payment is back in
// CREATED with no provider.
func TestFailoverOnlyWhenNothingWasSent(t *testing.T) {
	t.Parallel()
	s := newTwoProviders(t)
	p := s.pod(t, "pod")
	c := proctest.NewClient(p.URL(), s.t1.APIKey)

	s.a.Kill()
	r := c.MustPay(t, "k-1", apiclient.Visa("o-1", 500))
	require.Equal(t, 201, r.Status, "%s", r)
	require.Equal(t, "sim_b", r.Str("provider"))
	failedOver := r.Str("id")
	require.Equal(t, 1, s.b.SucceededChargesFor(t, failedOver))
	require.Equal(t, []lifecycle.Status{lifecycle.Created, lifecycle.Pending, lifecycle.Created, lifecycle.Pending, lifecycle.Succeeded},
		trailOf(t, s.db, failedOver), "PENDING at A, not_sent, PENDING at B")

	s.b.Kill()
	r = c.MustPay(t, "k-2", apiclient.Visa("o-2", 500))
	require.NoError(t, r.CheckProblem(503, "provider_unavailable"))
	require.GreaterOrEqual(t, r.RetryAfter(), 1)
	var status string
	var prov *string
	require.NoError(t, s.db.Pool.QueryRow(context.Background(),
		`SELECT status, provider FROM payment_attempts WHERE order_id = 'o-2'`).Scan(&status, &prov))
	require.Equal(t, "CREATED", status)
	require.Nil(t, prov, "no provider was chosen: nothing was sent")

	s.a.Restart()
	r = c.MustPay(t, "k-2", apiclient.Visa("o-2", 500))
	require.Equal(t, 201, r.Status, "the same key pays once a provider is back: %s", r)
	require.Equal(t, "sim_a", r.Str("provider"))
	s.b.Restart()
	a, b := s.chargesFor(t, r.Str("id"))
	require.Equal(t, [2]int{1, 0}, [2]int{a, b})
	a, b = s.chargesFor(t, failedOver)
	require.Equal(t, [2]int{0, 1}, [2]int{a, b}, "the first payment was never charged at A")
}

// TestAmbiguousPinsThePayment: A answering 503 may have charged, so the
// payment becomes UNKNOWN at A and is never charged at B; once A's breaker
// opens new payments go to B; the UNKNOWN payment's retry goes back to A
// alone (503 while A's breaker is open) and pays there once; the reconciler
// and settlement ask each payment's own provider.
func TestAmbiguousPinsThePayment(t *testing.T) {
	t.Parallel()
	s := newTwoProviders(t)
	p := s.pod(t, "pod", "PROVIDER_BREAKER_FAILURES=2", "PROVIDER_BREAKER_COOLDOWN=2s")
	c := proctest.NewClient(p.URL(), s.t1.APIKey)

	s.a.SetFaults(t, providersim.Faults{ErrorRate: 1, ErrorStatus: 503})
	stuck := c.MustPay(t, "k-stuck", apiclient.Visa("o-stuck", 500))
	require.Equal(t, 202, stuck.Status, "%s", stuck)
	require.Equal(t, "sim_a", stuck.Str("provider"), "pinned where the call may have landed")
	testkit.Eventually(t, 10*time.Second, "new payments go to B while A's breaker is open", func() bool {
		r := c.MustPay(t, testkit.RandomID("k-new-"), apiclient.Visa(testkit.RandomID("o-new-"), 500))
		return r.Status == 201 && r.Str("provider") == "sim_b"
	})
	a, b := s.chargesFor(t, stuck.Str("id"))
	require.Equal(t, [2]int{0, 0}, [2]int{a, b}, "never charged at B")

	s.a.ClearFaults(t)
	testkit.Eventually(t, 30*time.Second, "the retry pays at A once its breaker lets a call through", func() bool {
		r := c.MustPay(t, "k-stuck", apiclient.Visa("o-stuck", 500))
		if r.Status == 503 {
			require.NoError(t, r.CheckProblem(503, "provider_unavailable"), "A's breaker is open: only A may be asked")
			return false
		}
		require.Equal(t, 201, r.Status, "%s", r)
		require.Equal(t, "sim_a", r.Str("provider"))
		return true
	})
	a, b = s.chargesFor(t, stuck.Str("id"))
	require.Equal(t, [2]int{1, 0}, [2]int{a, b})

	// An UNKNOWN payment at B (its answers lost), resolved by the reconciler
	// asking B.
	require.Equal(t, 200, putRouting(t, c, `{"rules":[{"providers":["sim_b"]}]}`).Status)
	s.b.SetFaults(t, providersim.Faults{DropAfterCommit: true})
	lost := c.MustPay(t, "k-lost", apiclient.Visa("o-lost", 700))
	require.Equal(t, 202, lost.Status, "%s", lost)
	require.Equal(t, "sim_b", lost.Str("provider"))
	s.b.ClearFaults(t)
	out := s.reconciler(t, "run", "--min-age", "0s")
	require.JSONEq(t, `{"checked":1,"succeeded":1,"failed":0,"still_unknown":0,"needs_review":0,"errors":0,
		"refunds":{"checked":0,"succeeded":0,"failed":0,"still_unknown":0},"captures":{"checked":0,"succeeded":0,"failed":0,"still_unknown":0},"voids":{"checked":0,"succeeded":0,"failed":0,"still_unknown":0},"expired":0,"authorized":0}`, out)
	r := c.MustGet(t, "/v1/payments/"+lost.Str("id"))
	require.Equal(t, "SUCCEEDED", r.Str("status"))
	a, b = s.chargesFor(t, lost.Str("id"))
	require.Equal(t, [2]int{0, 1}, [2]int{a, b})

	// Settlement covers both providers; a succeeded charge at B of a
	// payment that is at A is an orphan there, and is refunded at B.
	orphan := s.b.Provider("sk_sim", proctest.FastProvider).CreateCharge(context.Background(), provider.ChargeRequest{
		Amount: 500, Currency: "USD", PaymentMethod: "pm_card_visa", Reference: stuck.Str("id"), IdempotencyKey: "psvc_" + stuck.Str("id"),
	})
	require.Equal(t, provider.Succeeded, orphan.Outcome, "%v", orphan.Err)
	day := time.Now().UTC().Format("2006-01-02")
	total := len(s.a.Charges(t)) + len(s.b.Charges(t))
	rep := s.reconciler(t, "settle", "--day", day)
	require.JSONEq(t, fmt.Sprintf(`{"day":%q,"provider_charges":%d,"matched":%d,"orphans_refunded":1,"orphans_voided":0,"amount_mismatches":0,"missing_at_provider":0,"foreign":0}`,
		day, total, total-1), rep)
	for _, ch := range s.b.Charges(t) {
		require.Equal(t, ch.Reference == stuck.Str("id"), ch.Refunded, "only the orphan at B is refunded: %s", ch.ID)
	}
}

// TestProviderRemovedFromProviders: PROVIDERS loses sim_b while a tenant's
// rules and some payments still name it (a pod and the reconciler started
// with sim_a only). GET /v1/routing still shows the rules as stored. A new
// payment skips sim_b: it goes to the next provider of its rule, or, when
// the rule names no other, is answered 503 provider_unavailable with
// nothing charged, the key released and the payment CREATED. A payment
// pinned to sim_b stays there: its retry and its refund answer 503,
// ?sync=true answers it as it is, the reconciler counts its check as an
// error and settlement fails the day (exit 1) after checking the rest. No
// 500, no charge anywhere but where each payment is.
func TestProviderRemovedFromProviders(t *testing.T) {
	t.Parallel()
	s := newTwoProviders(t)
	c := proctest.NewClient(s.pod(t, "before").URL(), s.t1.APIKey)
	rules := `{"rules":[{"currency":"EUR","providers":["sim_b","sim_a"]},{"providers":["sim_b"]}]}`
	require.Equal(t, 200, putRouting(t, c, rules).Status)
	paid := c.MustPay(t, "k-paid", apiclient.Visa("o-paid", 500))
	require.Equal(t, 201, paid.Status, "%s", paid)
	require.Equal(t, "sim_b", paid.Str("provider"))
	s.b.SetFaults(t, providersim.Faults{DropAfterCommit: true})
	lost := c.MustPay(t, "k-lost", apiclient.Visa("o-lost", 700))
	require.Equal(t, 202, lost.Status, "%s", lost)
	require.Equal(t, "sim_b", lost.Str("provider"))
	s.b.ClearFaults(t)

	onlyA := shortTimings(shortLockTTL, "PROVIDERS=sim_a="+s.a.URL())
	after := proctest.StartPod(t, proctest.PodOptions{Name: "after", DatabaseURL: s.db.URL, ProviderURL: s.a.URL(), Env: onlyA})
	ca := proctest.NewClient(after.URL(), s.t1.APIKey)
	require.JSONEq(t, rules, string(ca.MustGet(t, "/v1/routing").Raw), "the rules as stored")

	eur := ca.MustPay(t, "k-eur", apiclient.Payment{OrderID: "o-eur", Amount: 500, Currency: "EUR", PaymentMethod: "pm_card_visa"})
	require.Equal(t, 201, eur.Status, "%s", eur)
	require.Equal(t, "sim_a", eur.Str("provider"), "sim_b skipped")
	require.Equal(t, []lifecycle.Status{lifecycle.Created, lifecycle.Pending, lifecycle.Succeeded}, trailOf(t, s.db, eur.Str("id")))

	for range 2 { // the first request, then its retry
		r := ca.MustPay(t, "k-usd", apiclient.Visa("o-usd", 500))
		require.NoError(t, r.CheckProblem(503, "provider_unavailable"))
		require.Equal(t, 1, r.RetryAfter())
	}
	var usd string
	var prov *string
	require.NoError(t, s.db.Pool.QueryRow(context.Background(),
		`SELECT id, provider FROM payment_attempts WHERE order_id = 'o-usd'`).Scan(&usd, &prov))
	require.Nil(t, prov)
	require.Equal(t, []lifecycle.Status{lifecycle.Created}, trailOf(t, s.db, usd))

	require.NoError(t, ca.MustPay(t, "k-lost", apiclient.Visa("o-lost", 700)).CheckProblem(503, "provider_unavailable"))
	synced := ca.MustGet(t, "/v1/payments/"+lost.Str("id")+"?sync=true")
	require.Equal(t, 200, synced.Status, "%s", synced)
	require.Equal(t, "UNKNOWN", synced.Str("status"))
	require.Equal(t, "sim_b", synced.Str("provider"))
	require.NoError(t, mustRefund(t, ca, paid.Str("id"), "k-refund", 0).CheckProblem(503, "provider_unavailable"))
	var refundID, refundStatus string
	require.NoError(t, s.db.Pool.QueryRow(context.Background(),
		`SELECT id, status FROM refunds WHERE payment_id = $1`, paid.Str("id")).Scan(&refundID, &refundStatus))
	require.Equal(t, "CREATED", refundStatus)

	// One warning per request that skipped sim_b; none for the sync.
	skipped := map[string]int{}
	for _, l := range opsLogLines(after) {
		if l.str("msg") == "skipping providers that are not configured (PROVIDERS)" {
			require.Equal(t, "WARN", l.str("level"))
			require.Equal(t, []any{"sim_b"}, l["skipped"])
			skipped[l.str("payment_id")+l.str("refund_id")]++
		}
	}
	require.Equal(t, map[string]int{eur.Str("id"): 1, usd: 2, lost.Str("id"): 1, refundID: 1}, skipped)

	env := append(onlyA, "DATABASE_URL="+s.db.URL)
	stdout, stderr, code, err := proctest.Run(context.Background(), proctest.Build(t).Reconciler, []string{"run", "--min-age", "0s"}, env)
	require.NoError(t, err)
	require.Equal(t, 0, code, "%s", stderr)
	require.JSONEq(t, `{"checked":2,"succeeded":0,"failed":1,"still_unknown":1,"needs_review":0,"errors":1,
		"refunds":{"checked":1,"succeeded":0,"failed":1,"still_unknown":0},"captures":{"checked":0,"succeeded":0,"failed":0,"still_unknown":0},"voids":{"checked":0,"succeeded":0,"failed":0,"still_unknown":0},"expired":0,"authorized":0}`, stdout,
		"the CREATED payment and refund abandoned; the check of the one pinned to sim_b an error")
	day := time.Now().UTC().Format("2006-01-02")
	stdout, stderr, code, err = proctest.Run(context.Background(), proctest.Build(t).Reconciler, []string{"settle", "--day", day}, env)
	require.NoError(t, err)
	require.Equal(t, 1, code, "a SUCCEEDED payment at sim_b cannot be checked: %s", stdout)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "succeeded payment at a provider that is not configured; not checked")
	require.Contains(t, stderr, "provider not configured (PROVIDERS)")

	var status string
	require.NoError(t, s.db.Pool.QueryRow(context.Background(),
		`SELECT status, provider FROM payment_attempts WHERE id = $1`, lost.Str("id")).Scan(&status, &prov))
	require.Equal(t, "UNKNOWN", status, "left as it was")
	require.Equal(t, "sim_b", *prov)
	for id, want := range map[string][2]int{paid.Str("id"): {0, 1}, lost.Str("id"): {0, 1}, eur.Str("id"): {1, 0}, usd: {0, 0}} {
		a, b := s.chargesFor(t, id)
		require.Equal(t, want, [2]int{a, b}, "charges of %s at sim_a, sim_b", id)
	}
}

// reconciler runs the reconciler with the pods' provider settings and
// returns its stdout, requiring exit 0.
func (s *twoProviders) reconciler(t *testing.T, args ...string) string {
	t.Helper()
	env := append(shortTimings(shortLockTTL, s.providers()), "DATABASE_URL="+s.db.URL)
	stdout, stderr, code, err := proctest.Run(context.Background(), proctest.Build(t).Reconciler, args, env)
	require.NoError(t, err)
	require.Equal(t, 0, code, "reconciler %v: %s", args, stderr)
	return stdout
}

// trailOf is payment id's audit trail.
func trailOf(t *testing.T, d *testdb.DB, id string) []lifecycle.Status {
	t.Helper()
	return testdb.Strings[lifecycle.Status](context.Background(), t, d.Pool, "SELECT to_status FROM payment_attempt_events WHERE attempt_id = $1 ORDER BY id", id)
}

// TestWebhooksPerProvider: each provider's webhooks arrive at its own path
// with its own secrets; an unknown provider is 404; what a provider says of
// a payment that is not at it changes nothing (wrong_provider).
func TestWebhooksPerProvider(t *testing.T) {
	t.Parallel()
	s := newTwoProviders(t)
	p := s.pod(t, "pod", "WEBHOOK_SECRETS_SIM_B=whsec_b")
	c := proctest.NewClient(p.URL(), s.t1.APIKey)
	paid := c.MustPay(t, "k-1", apiclient.Visa("o-1", 500))
	require.Equal(t, "sim_a", paid.Str("provider"))
	hooks := proctest.NewClient(p.URL(), "")
	send := func(path, secret string, body []byte) apiclient.Response {
		t.Helper()
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + "." + string(body)))
		return hooks.MustDo(t, http.MethodPost, path, body, map[string]string{
			"Content-Type": "application/json", "Sim-Signature": "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil)),
		})
	}
	ch := providersim.Charge{ID: paid.Str("provider_charge_id"), Amount: 500, Currency: "USD", Status: "failed",
		Reference: paid.Str("id"), IdempotencyKey: "psvc_" + paid.Str("id")}
	ev := func(id string) []byte {
		b, err := json.Marshal(providersim.Event{ID: id, Type: "charge.failed", Created: time.Now().Unix(), Data: providersim.EventData{Charge: ch}})
		require.NoError(t, err)
		return b
	}
	require.NoError(t, send("/v1/webhooks/sim_c", "whsec_dev", ev("evt_1")).CheckProblem(404, "not_found"))
	require.NoError(t, send("/v1/webhooks/sim_b", "whsec_dev", ev("evt_2")).CheckProblem(401, "invalid_signature"), "B has its own secret")
	r := send("/v1/webhooks/sim_b", "whsec_b", ev("evt_3"))
	require.Equal(t, 200, r.Status, "%s", r)
	require.Equal(t, "SUCCEEDED", c.MustGet(t, "/v1/payments/"+paid.Str("id")).Str("status"), "B's word about a payment at A changes nothing")
	var kind, detail string
	require.NoError(t, s.db.Pool.QueryRow(context.Background(),
		`SELECT kind, detail->>'reason' FROM anomalies WHERE attempt_id = $1`, paid.Str("id")).Scan(&kind, &detail))
	require.Equal(t, "wrong_provider", kind)
	require.Contains(t, detail, "sim_a")
	// A's own webhook (with the default secret) is applied at its path:
	// a contradiction of a final payment, recorded as such.
	require.Equal(t, 200, send("/v1/webhooks/sim_a", "whsec_dev", ev("evt_4")).Status)
	var conflicts int
	require.NoError(t, s.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM anomalies WHERE attempt_id = $1 AND kind = 'conflicting_report'`, paid.Str("id")).Scan(&conflicts))
	require.Equal(t, 1, conflicts)
}

// TestProvidersChaos mixes provider kills, faults and retries with the same
// keys over seeded random rounds, and checks after each round that no
// payment was charged more than once across both providers, and that a
// SUCCEEDED payment's one charge is at the provider it records. Set
// PROVIDERS_CHAOS_SEED to replay a run.
func TestProvidersChaos(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("chaos rounds")
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("PROVIDERS_CHAOS_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("PROVIDERS_CHAOS_SEED=%d", seed)
	rnd := rand.New(rand.NewPCG(seed, seed))
	s := newTwoProviders(t)
	p := s.pod(t, "pod", "PROVIDER_BREAKER_FAILURES=3", "PROVIDER_BREAKER_COOLDOWN=500ms")
	c := proctest.NewClient(p.URL(), s.t1.APIKey)
	sims := []*proctest.Sim{s.a, s.b}
	type intent struct{ key, order string }
	var intents []intent
	for round := range 12 {
		// Break things.
		for _, sim := range sims {
			switch rnd.IntN(4) {
			case 0:
				sim.Kill()
			case 1:
				sim.SetFaults(t, providersim.Faults{ErrorRate: 0.5, ErrorStatus: 503})
			case 2:
				sim.SetFaults(t, providersim.Faults{DropAfterCommit: true})
			}
		}
		// Pay: new intents and retries of old ones, same key each time.
		for range 4 {
			it := intent{testkit.RandomID("k-"), testkit.RandomID("o-")}
			if len(intents) > 0 && rnd.IntN(2) == 0 {
				it = intents[rnd.IntN(len(intents))]
			} else {
				intents = append(intents, it)
			}
			r, err := c.Pay(it.key, apiclient.Visa(it.order, 500))
			require.NoError(t, err)
			require.Contains(t, []int{201, 202, 409, 503}, r.Status, "round %d: %s", round, r)
		}
		// Mend, then check every payment so far.
		for _, sim := range sims {
			if sim.Exited() {
				sim.Restart()
			}
			sim.ClearFaults(t)
		}
		byRef := map[string]map[string]int{} // payment → provider → succeeded charges
		for i, sim := range sims {
			for _, ch := range sim.Charges(t) {
				if ch.Status != providersim.StatusSucceeded {
					continue
				}
				if byRef[ch.Reference] == nil {
					byRef[ch.Reference] = map[string]int{}
				}
				byRef[ch.Reference][[]string{"sim_a", "sim_b"}[i]]++
			}
		}
		rows, err := s.db.Pool.Query(context.Background(), `SELECT id, status, provider FROM payment_attempts`)
		require.NoError(t, err)
		for rows.Next() {
			var id, status string
			var prov *string
			require.NoError(t, rows.Scan(&id, &status, &prov))
			total := 0
			for _, n := range byRef[id] {
				total += n
			}
			require.LessOrEqual(t, total, 1, "round %d: payment %s (%s) charged %v", round, id, status, byRef[id])
			if status == "SUCCEEDED" {
				require.NotNil(t, prov, "round %d: %s", round, id)
				require.Equal(t, 1, byRef[id][*prov], "round %d: SUCCEEDED %s has its charge at %s: %v", round, id, *prov, byRef[id])
			}
		}
		require.NoError(t, rows.Err())
		rows.Close()
	}
}
