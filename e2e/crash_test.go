package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/failpoint"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// Short timings keep the crash and fault tests fast: a lock expires 3s after
// its owner died, one provider call gives up after 500ms, and one charge
// stops retrying after 1.5s. The service refuses a lock TTL that is not longer
// than budget + call timeout, so 3s leaves a second of margin.
const (
	shortLockTTL     = 3 * time.Second
	shortCallTimeout = "500ms"
	shortRetryBudget = "1500ms"
)

// shortTimings are the pod settings of the resilience tests; extra settings
// come last and so override them.
func shortTimings(lockTTL time.Duration, extra ...string) []string {
	return append([]string{
		"IDEMPOTENCY_LOCK_TTL=" + lockTTL.String(),
		"PROVIDER_CALL_TIMEOUT=" + shortCallTimeout,
		"PROVIDER_RETRY_BUDGET=" + shortRetryBudget,
		"PROVIDER_BREAKER_COOLDOWN=1s",
	}, extra...)
}

// faultStack is a simulator and a tenant on a fresh database, to which each
// test adds the pods it needs (each with its own failpoint or timings).
type faultStack struct {
	db     *testdb.DB
	sim    *proctest.Sim
	tenant proctest.Tenant
}

func newFaultStack(t *testing.T) *faultStack {
	t.Helper()
	d := testdb.New(t)
	sim := proctest.StartSim(t, proctest.SimOptions{})
	tn := proctest.CreateTenant(t, d.URL, "shop")
	return &faultStack{db: d, sim: sim, tenant: tn}
}

// startPod runs one paymentsvc pod with env and returns it with a client.
func (s *faultStack) startPod(t *testing.T, name string, env ...string) (*proctest.Process, *proctest.Client) {
	t.Helper()
	p := proctest.StartPod(t, proctest.PodOptions{Name: name, DatabaseURL: s.db.URL, ProviderURL: s.sim.URL(), Env: env})
	return p, s.client(p)
}

// client is a tenant client of p at its current address (a restarted pod
// listens on a new port).
func (s *faultStack) client(p *proctest.Process) *proctest.Client {
	return proctest.NewClient(p.URL(), s.tenant.APIKey)
}

// trail returns the statuses of attempt id's audit trail, in order.
func (s *faultStack) trail(t *testing.T, id string) []attempts.Status {
	t.Helper()
	return trailOf(t, s.db, id)
}

// keyState reads the idempotency key's lock and stored response.
func (s *faultStack) keyState(t *testing.T, key string) (locked, stored bool) {
	t.Helper()
	err := s.db.Pool.QueryRow(context.Background(),
		`SELECT locked_until IS NOT NULL AND locked_until > now(), response_code IS NOT NULL
		 FROM idempotency_keys WHERE tenant_id = $1 AND key = $2`, s.tenant.ID, key).Scan(&locked, &stored)
	require.NoError(t, err)
	return locked, stored
}

// onlyPaymentOf lists order's payments through the API and requires one.
func onlyPaymentOf(t *testing.T, c *proctest.Client, order string) map[string]any {
	t.Helper()
	r, err := c.Get("/v1/payments?order_id=" + order)
	require.NoError(t, err)
	require.Equal(t, 200, r.Status, "%s", r)
	data, _ := r.JSON["data"].([]any)
	require.Len(t, data, 1, "payments of %s: %s", order, r)
	p, _ := data[0].(map[string]any)
	return p
}

// requireRetryAfter requires a Retry-After header of whole seconds, at least 1.
func requireRetryAfter(t *testing.T, r apiclient.Response) int {
	t.Helper()
	n := r.RetryAfter()
	require.GreaterOrEqual(t, n, 1, "Retry-After %q on %s", r.Header.Get("Retry-After"), r)
	return n
}

// crashCase is one failpoint: what the payment looks like between the crash
// and the retry, and how many charge calls the provider sees in all.
type crashCase struct {
	failpoint   string
	statusAfter attempts.Status
	chargeCalls int64
}

// testCrashThenRetry plays scenario 4 of docs/failure-scenarios.md with one failpoint: pod A dies
// mid-request; an immediate retry on pod B finds the key locked (409); once
// the lock expires a retry on pod B takes the key over, resumes the attempt
// and answers 201 with the one charge the provider holds.
func testCrashThenRetry(t *testing.T, c crashCase) {
	s := newFaultStack(t)
	// A lock TTL longer than the default short one leaves room for a slow
	// machine between pod A taking the key and the immediate retry on pod B.
	lockTTL := 5 * time.Second
	podA, a := s.startPod(t, "pod-a", shortTimings(lockTTL, "PAYMENTSVC_FAILPOINT="+c.failpoint)...)
	_, b := s.startPod(t, "pod-b", shortTimings(lockTTL)...)
	const order, key = "o-4", "seed-4"
	body := apiclient.Visa(order, 500)

	first, err := a.Pay(key, body)
	require.Error(t, err, "pod A dies mid-request at %s, yet answered %s", c.failpoint, first)
	testkit.Eventually(t, 30*time.Second, "pod A exits", podA.Exited)
	require.Equal(t, 137, podA.ExitCode(), "pod A's exit status")

	r := b.MustPay(t, key, body)
	require.NoError(t, r.CheckProblem(409, "idempotency_key_in_use"))
	require.LessOrEqual(t, requireRetryAfter(t, r), int(lockTTL.Seconds()))
	require.Equal(t, string(c.statusAfter), onlyPaymentOf(t, b, order)["status"], "the payment as pod A left it")
	locked, stored := s.keyState(t, key)
	require.True(t, locked, "the dead owner's lock holds until it expires")
	require.False(t, stored)

	testkit.Eventually(t, time.Minute, "a retry after the lock TTL is served", func() bool {
		r = b.MustPay(t, key, body)
		return r.Status != 409
	})
	require.Equal(t, 201, r.Status, "%s", r)
	require.Equal(t, "SUCCEEDED", r.Str("status"))
	require.False(t, r.Replayed(), "the retry resumed the attempt; nothing was stored to replay")

	charges := s.sim.Charges(t)
	require.Len(t, charges, 1, "the provider holds exactly one charge")
	require.Equal(t, charges[0].ID, r.Str("provider_charge_id"))
	require.Equal(t, r.Str("id"), charges[0].Reference)
	require.Equal(t, c.chargeCalls, s.sim.Stats(t).ChargeCalls, "charge calls at the provider")

	again := b.MustPay(t, key, body)
	require.Equal(t, 201, again.Status, "%s", again)
	require.True(t, again.Replayed())
	require.JSONEq(t, string(r.Raw), string(again.Raw))
	require.Len(t, s.sim.Charges(t), 1)

	require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending, attempts.Succeeded}, s.trail(t, r.Str("id")))
	locked, stored = s.keyState(t, key)
	require.False(t, locked)
	require.True(t, stored)
}

// Scenario 4 of docs/failure-scenarios.md: the pod crashes after the provider charged, before saving.
// The retry calls the provider again with the same derived key, and the
// provider answers with the charge it already made.
func TestCrashAfterProviderCallRetryGetsTheSameCharge(t *testing.T) {
	t.Parallel()
	testCrashThenRetry(t, crashCase{failpoint: failpoint.AfterProviderCall, statusAfter: attempts.Pending, chargeCalls: 2})
}

// The pod crashes with the key and the CREATED attempt committed, before the
// provider was called: the retry makes the first and only charge call.
func TestCrashAfterKeyAcquiredRetryChargesOnce(t *testing.T) {
	t.Parallel()
	testCrashThenRetry(t, crashCase{failpoint: failpoint.AfterKeyAcquired, statusAfter: attempts.Created, chargeCalls: 1})
}

// The pod crashes inside the completing transaction: nothing of it commits,
// so the payment is still PENDING and the retry finds the charge again.
func TestCrashBeforeCompleteCommitRetryGetsTheOneCharge(t *testing.T) {
	t.Parallel()
	testCrashThenRetry(t, crashCase{failpoint: failpoint.BeforeCompleteCommit, statusAfter: attempts.Pending, chargeCalls: 2})
}
