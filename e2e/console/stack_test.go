package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// stack is one test's service: its database, a simulator process (that
// sends no webhooks, so only the console resolves what it leaves open), a
// paymentsvc process with its console on a reserved port, and a tenant.
type stack struct {
	db      *testdb.DB
	sim     *proctest.Sim
	pod     *proctest.Process
	console string // the console's base URL
	tenant  proctest.Tenant
	api     *proctest.Client
}

func startStack(t *testing.T, env ...string) *stack {
	t.Helper()
	s := &stack{db: testdb.New(t), sim: proctest.StartSim(t, proctest.SimOptions{})}
	addr := testkit.ReservedAddr(t)
	s.console = "http://" + addr
	s.pod = proctest.StartPod(t, proctest.PodOptions{
		DatabaseURL: s.db.URL, ProviderURL: s.sim.URL(),
		// Provider timings with room for a loaded machine (a call that
		// times out before it is sent would answer 503, not the payment),
		// and a breaker that the tries of a lost answer do not open.
		Env: append([]string{"CONSOLE_ADDR=" + addr, "PROVIDER_CALL_TIMEOUT=5s", "PROVIDER_RETRY_BUDGET=2s", "IDEMPOTENCY_LOCK_TTL=10s",
			"PROVIDER_BREAKER_FAILURES=1000"}, env...),
	})
	s.tenant = proctest.CreateTenant(t, s.db.URL, "Corner Coffee")
	s.api = proctest.NewClient(s.pod.URL(), s.tenant.APIKey)
	return s
}

// operator is one made by `paymentsvc operator create`.
type operator struct {
	Email    string `json:"email"`
	Role     string `json:"role"`
	Password string `json:"password"`
}

// paymentsvc runs the binary's command args against the stack's database.
func (s *stack) paymentsvc(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stdout, stderr, code, err := proctest.Run(ctx, proctest.Build(t).PaymentSvc, args, []string{"DATABASE_URL=" + s.db.URL})
	require.NoError(t, err)
	return stdout, stderr, code
}

func (s *stack) operator(t *testing.T, role string) operator {
	t.Helper()
	out, errOut, code := s.paymentsvc(t, "operator", "create", "--email", testkit.RandomID(role+"-")+"@example.com", "--role", role)
	require.Equal(t, 0, code, errOut)
	var op operator
	require.NoError(t, json.Unmarshal([]byte(out), &op), out)
	require.Equal(t, role, op.Role)
	require.GreaterOrEqual(t, len(op.Password), 20)
	return op
}

// signedIn makes an operator with role and a browser signed in as it, on
// the overview.
func (s *stack) signedIn(t *testing.T, role string) (operator, *browser) {
	t.Helper()
	op := s.operator(t, role)
	b := newBrowser(t, s.console)
	b.signIn(op.Email, op.Password)
	return op, b
}

// pay makes a payment through the tenant API and returns its answer.
func (s *stack) pay(t *testing.T, orderID string, amount int64, extra map[string]any) apiclient.Response {
	t.Helper()
	body := map[string]any{"order_id": orderID, "amount": amount, "currency": "USD", "payment_method": "pm_card_visa"}
	for k, v := range extra {
		body[k] = v
	}
	return s.api.MustPay(t, testkit.RandomID("key-"), body)
}

// succeeded makes a SUCCEEDED payment and returns its id.
func (s *stack) succeeded(t *testing.T, orderID string, amount int64, extra map[string]any) string {
	t.Helper()
	r := s.pay(t, orderID, amount, extra)
	require.Equal(t, http.StatusCreated, r.Status, r.String())
	return r.Str("id")
}

// count runs a count(*) query on the stack's database.
func (s *stack) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, s.db.Pool.QueryRow(t.Context(), query, args...).Scan(&n), query)
	return n
}

func paymentPath(id string) string { return fmt.Sprintf("/console/payments/%s", id) }
