package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// binary is paymentsctl, built with the other binaries (proctest.Build).
func binary(t *testing.T) string {
	t.Helper()
	return proctest.Build(t).PaymentsCtl
}

type result struct {
	code           int
	stdout, stderr string
}

// key is the idempotency_key=K line of stderr ("" if none).
func (r result) key() string {
	for line := range strings.SplitSeq(r.stderr, "\n") {
		if k, ok := strings.CutPrefix(line, "idempotency_key="); ok {
			return k
		}
	}
	return ""
}

// object decodes stdout as one JSON object.
func (r result) object(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &m), "stdout %q, stderr %s", r.stdout, r.stderr)
	return m
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}

// ctl runs paymentsctl with env (added to childproc.Env(), which holds none
// of the PAYMENTS_* variables) and args, within two minutes of its start
// (the build, which a busy machine may take minutes over, comes first).
func ctl(t *testing.T, env []string, args ...string) result {
	t.Helper()
	bin := binary(t) // before the deadline: a first build on a busy machine takes a while
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	stdout, stderr, code, err := proctest.Run(ctx, bin, args, env)
	require.NoError(t, err, "run paymentsctl %v", args)
	return result{code: code, stdout: stdout, stderr: stderr}
}

func TestHelpExits0(t *testing.T) {
	t.Parallel()
	env := []string{"PAYMENTS_API_KEY=sk_secret_value"}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}, {"pay", "-h"}, {"refund", "--help"}, {"capture", "-h"}, {"void", "-h"}, {"get", "-h"}, {"list", "-h"}} {
		r := ctl(t, env, args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r)
		for _, word := range []string{"pay", "refund", "capture", "void", "get", "list", "PAYMENTS_URL", "PAYMENTS_API_KEY", "idempotency_key="} {
			require.Contains(t, r.stderr, word, args)
		}
		require.NotContains(t, r.stderr, "secret", "-h never prints the API key")
		require.Empty(t, r.stdout)
	}
	r := ctl(t, env, "pay", "-h")
	for _, flag := range []string{"--order-id", "--amount", "--currency", "--payment-method", "--capture-method", "--idempotency-key", "--timeout", "--payments-url", "--payments-api-key"} {
		require.Contains(t, r.stderr, flag)
	}
	r = ctl(t, env, "void", "-h")
	require.Contains(t, r.stderr, "--reason")
}

func TestBadUsageExits2(t *testing.T) {
	t.Parallel()
	pay := []string{"pay", "--order-id", "o-1", "--amount", "500", "--currency", "USD", "--payment-method", "pm_card_visa"}
	for _, tc := range []struct {
		env  []string
		args []string
	}{
		{nil, nil},
		{nil, []string{"charge"}},
		{nil, []string{"--payments-url", "http://x", "pay"}},
		{nil, []string{"pay"}},
		{nil, []string{"pay", "--order-id", "o-1", "--amount", "500", "--currency", "USD"}},
		{nil, []string{"pay", "--order-id", "o-1", "--amount", "five", "--currency", "USD", "--payment-method", "pm_card_visa"}},
		{nil, []string{"pay", "--order-id", "o-1", "--amount", "-5", "--currency", "USD", "--payment-method", "pm_card_visa"}},
		{nil, append(pay, "--no-such-flag")},
		{nil, append(pay, "extra")},
		{nil, append(pay, "--timeout", "0s")},
		{nil, append(pay, "--payments-url", "ftp://127.0.0.1:1")},
		{[]string{"PAYMENTS_URL=not a url"}, pay},
		{nil, []string{"refund"}},
		{nil, []string{"refund", "pay_1", "--amount", "0"}},
		{nil, []string{"refund", "pay_1", "pay_2"}},
		{nil, append(pay, "--capture-method", "later")},
		{nil, []string{"capture"}},
		{nil, []string{"capture", "pay_1", "--amount", "0"}},
		{nil, []string{"capture", "pay_1", "--reason", "duplicate"}},
		{nil, []string{"void"}},
		{nil, []string{"void", "pay_1", "--reason", "bored"}},
		{nil, []string{"void", "pay_1", "--amount", "5"}},
		{nil, []string{"get"}},
		{nil, []string{"get", "pay_1", "pay_2"}},
		{nil, []string{"list", "extra"}},
		{nil, []string{"list", "--limit", "-1"}},
	} {
		r := ctl(t, tc.env, tc.args...)
		require.Equal(t, 2, r.code, "%v %v: %s", tc.env, tc.args, r)
		require.Empty(t, r.stdout, "%v", tc.args)
		require.Empty(t, r.key(), "%v: nothing was tried", tc.args)
	}
}

// Nothing listening: pay and refund retry until --timeout and exit 4,
// having printed the key first; get and list exit 1.
func TestNothingListening(t *testing.T) {
	t.Parallel()
	env := []string{"PAYMENTS_URL=" + testkit.RefusedURL(t, "http"), "PAYMENTS_API_KEY=sk_x"}
	r := ctl(t, env, "pay", "--order-id", "o-1", "--amount", "500", "--currency", "USD", "--payment-method", "pm_card_visa", "--timeout", "1s")
	require.Equal(t, 4, r.code, "%s", r)
	require.True(t, strings.HasPrefix(r.key(), "idem_"), "a minted key: %s", r)
	require.Empty(t, r.stdout, "no payment was reported")
	require.Contains(t, r.stderr, "not final")

	r = ctl(t, env, "refund", "pay_1", "--timeout", "1s")
	require.Equal(t, 4, r.code, "%s", r)
	require.Equal(t, "ctl-pay_1-rest", r.key())
	r = ctl(t, env, "capture", "pay_1", "--timeout", "1s")
	require.Equal(t, 4, r.code, "%s", r)
	require.Equal(t, "ctl-capture-pay_1-all", r.key())
	r = ctl(t, env, "void", "pay_1", "--timeout", "1s")
	require.Equal(t, 4, r.code, "%s", r)
	require.Equal(t, "ctl-void-pay_1", r.key())

	r = ctl(t, env, "get", "pay_1", "--timeout", "1s")
	require.Equal(t, 1, r.code, "%s", r)
	r = ctl(t, env, "list", "--timeout", "1s")
	require.Equal(t, 1, r.code, "%s", r)
}

// A 409 idempotency_key_in_use whose Retry-After ends past --timeout is
// "not final" (4), not a refusal: the key is busy, not refused.
func TestInUseAtTheDeadlineExits4(t *testing.T) {
	t.Parallel()
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, `{"type":"https://paymentsvc.example/problems/idempotency_key_in_use","title":"Conflict",`+
			`"status":409,"detail":"a request with this key is in progress","code":"idempotency_key_in_use"}`)
	}))
	t.Cleanup(busy.Close)
	r := ctl(t, []string{"PAYMENTS_URL=" + busy.URL}, payArgs("o-1", "pm_card_visa", "--idempotency-key", "k-1", "--timeout", "5s")...)
	require.Equal(t, 4, r.code, "%s", r)
	require.Equal(t, "k-1", r.key())
	require.Empty(t, r.stdout, "no payment was reported")
	r = ctl(t, []string{"PAYMENTS_URL=" + busy.URL}, "refund", "pay_1", "--timeout", "5s")
	require.Equal(t, 4, r.code, "%s", r)
}

// stack is a simulator and a pod on a fresh database, and a tenant.
type stack struct {
	sim    *proctest.Sim
	pod    *proctest.Process
	apiKey string
}

func newStack(t *testing.T, podEnv ...string) *stack {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the real binaries; skipped with -short")
	}
	d := testdb.New(t)
	sim := proctest.StartSim(t, proctest.SimOptions{})
	tn := proctest.CreateTenant(t, d.URL, "shop")
	pod := proctest.StartPod(t, proctest.PodOptions{DatabaseURL: d.URL, ProviderURL: sim.URL(), Env: podEnv})
	return &stack{sim: sim, pod: pod, apiKey: tn.APIKey}
}

func (s *stack) env(extra ...string) []string {
	return append([]string{"PAYMENTS_URL=" + s.pod.URL(), "PAYMENTS_API_KEY=" + s.apiKey}, extra...)
}

func payArgs(order, method string, extra ...string) []string {
	return append([]string{"pay", "--order-id", order, "--amount", "500", "--currency", "USD", "--payment-method", method}, extra...)
}

// pay, get and list against a real pod: exit codes and output lines.
func TestPayGetList(t *testing.T) {
	t.Parallel()
	s := newStack(t)

	r := ctl(t, s.env(), payArgs("o-1", "pm_card_visa")...)
	require.Equal(t, 0, r.code, "%s", r)
	p := r.object(t)
	require.Equal(t, "SUCCEEDED", p["status"])
	key := r.key()
	require.True(t, strings.HasPrefix(key, "idem_"), "%s", r)
	id, _ := p["id"].(string)

	again := ctl(t, s.env(), payArgs("o-1", "pm_card_visa", "--idempotency-key", key)...)
	require.Equal(t, 0, again.code, "%s", again)
	require.Equal(t, key, again.key())
	require.Equal(t, p, again.object(t), "the same key: the stored answer")
	require.Equal(t, 1, s.sim.SucceededChargesFor(t, id))

	other := ctl(t, s.env(), payArgs("o-1", "pm_card_visa")...)
	require.Equal(t, 1, other.code, "another key for a paid order: %s", other)
	require.Equal(t, "order_already_has_payment", other.object(t)["code"])
	require.Equal(t, id, other.object(t)["payment_id"])

	declined := ctl(t, s.env(), payArgs("o-2", "pm_card_declined")...)
	require.Equal(t, 3, declined.code, "%s", declined)
	require.Equal(t, "FAILED", declined.object(t)["status"])
	require.Equal(t, "card_declined", declined.object(t)["failure_code"])

	got := ctl(t, s.env(), "get", id)
	require.Equal(t, 0, got.code, "%s", got)
	require.Equal(t, p, got.object(t))
	require.Empty(t, got.key(), "a read carries no key")
	synced := ctl(t, s.env(), "get", "--sync", id)
	require.Equal(t, 0, synced.code, "%s", synced)

	missing := ctl(t, s.env(), "get", "pay_missing")
	require.Equal(t, 1, missing.code, "%s", missing)
	require.Equal(t, "payment_not_found", missing.object(t)["code"])
	require.EqualValues(t, 404, missing.object(t)["status"])

	list := ctl(t, s.env(), "list", "--order-id", "o-1")
	require.Equal(t, 0, list.code, "%s", list)
	lines := strings.Split(strings.TrimSpace(list.stdout), "\n")
	require.Len(t, lines, 1, "%s", list)
	require.Contains(t, lines[0], id)
	all := ctl(t, s.env(), "list")
	require.Equal(t, 0, all.code, "%s", all)
	require.Len(t, strings.Split(strings.TrimSpace(all.stdout), "\n"), 2, "o-1's and o-2's: %s", all)

	for _, args := range [][]string{{"get", id}, {"list"}, payArgs("o-3", "pm_card_visa")} {
		bad := ctl(t, s.env("PAYMENTS_API_KEY=sk_wrong"), args...)
		require.Equal(t, 1, bad.code, "%v with a bad API key: %s", args, bad)
		require.Equal(t, "unauthorized", bad.object(t)["code"], "%v", args)
	}
	flagWins := ctl(t, s.env("PAYMENTS_API_KEY=sk_wrong"), "get", id, "--payments-api-key", s.apiKey)
	require.Equal(t, 0, flagWins.code, "--payments-api-key overrides the variable: %s", flagWins)
}

// PAYMENTS_URL is a list tried in turn, and --payments-url overrides it.
func TestURLList(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	refused := testkit.RefusedURL(t, "http")
	r := ctl(t, s.env("PAYMENTS_URL="+refused+","+s.pod.URL()), payArgs("o-1", "pm_card_visa")...)
	require.Equal(t, 0, r.code, "the first URL refuses, the retry goes to the second: %s", r)
	require.Contains(t, r.stderr, "retrying", "the refused try was logged")
	r = ctl(t, s.env("PAYMENTS_URL="+refused), "get", r.object(t)["id"].(string), "--payments-url", s.pod.URL())
	require.Equal(t, 0, r.code, "--payments-url overrides PAYMENTS_URL: %s", r)
}

// refund's default key names the payment and the amount, so running the
// same command again (after a timeout, say) never refunds twice.
func TestRefundDefaultKeyNeverRefundsTwice(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	id := ctl(t, s.env(), payArgs("o-1", "pm_card_visa")...).object(t)["id"].(string)

	first := ctl(t, s.env(), "refund", id, "--amount", "200")
	require.Equal(t, 0, first.code, "%s", first)
	require.Equal(t, "ctl-"+id+"-200", first.key())
	require.Equal(t, "SUCCEEDED", first.object(t)["status"])
	require.EqualValues(t, 200, first.object(t)["amount"])
	again := ctl(t, s.env(), "refund", "--amount", "200", id)
	require.Equal(t, 0, again.code, "%s", again)
	require.Equal(t, first.object(t)["id"], again.object(t)["id"], "the same refund, replayed")
	require.Equal(t, int64(1), s.sim.Stats(t).Refunds)

	rest := ctl(t, s.env(), "refund", id)
	require.Equal(t, 0, rest.code, "%s", rest)
	require.Equal(t, "ctl-"+id+"-rest", rest.key())
	require.EqualValues(t, 300, rest.object(t)["amount"])
	restAgain := ctl(t, s.env(), "refund", id)
	require.Equal(t, 0, restAgain.code, "%s", restAgain)
	require.Equal(t, rest.object(t)["id"], restAgain.object(t)["id"])
	require.Equal(t, int64(2), s.sim.Stats(t).Refunds, "two refunds at the provider, each once")

	more := ctl(t, s.env(), "refund", id, "--amount", "1")
	require.Equal(t, 1, more.code, "%s", more)
	require.Equal(t, "refund_exceeds_refundable", more.object(t)["code"])
	missing := ctl(t, s.env(), "refund", "pay_missing")
	require.Equal(t, 1, missing.code, "%s", missing)
	require.Equal(t, "payment_not_found", missing.object(t)["code"])

	got := ctl(t, s.env(), "get", rest.object(t)["id"].(string))
	require.Equal(t, 0, got.code, "%s", got)
	require.Equal(t, rest.object(t)["id"], got.object(t)["id"])
}

// The provider loses its answers: pay exits 4 at --timeout, printing the
// payment UNKNOWN and its key; run again with that key once the provider is
// back, it resumes the same payment to SUCCEEDED, charged once.
func TestPayNotFinalThenResumed(t *testing.T) {
	t.Parallel()
	s := newStack(t, "IDEMPOTENCY_LOCK_TTL=3s", "PROVIDER_CALL_TIMEOUT=500ms", "PROVIDER_RETRY_BUDGET=1500ms", "PROVIDER_BREAKER_COOLDOWN=1s")
	s.sim.SetFaults(t, providersim.Faults{DropAfterCommit: true})

	r := ctl(t, s.env(), payArgs("o-1", "pm_card_visa", "--timeout", "5s")...)
	require.Equal(t, 4, r.code, "%s", r)
	require.Equal(t, "UNKNOWN", r.object(t)["status"])
	key := r.key()
	require.NotEmpty(t, key)

	s.sim.ClearFaults(t)
	resumed := ctl(t, s.env(), payArgs("o-1", "pm_card_visa", "--idempotency-key", key)...)
	require.Equal(t, 0, resumed.code, "%s", resumed)
	require.Equal(t, r.object(t)["id"], resumed.object(t)["id"], "the same payment")
	require.Equal(t, "SUCCEEDED", resumed.object(t)["status"])
	require.Len(t, s.sim.Charges(t), 1, "exactly one charge")
}

// pay --capture-method manual stops at AUTHORIZED (exit 0); capture and void
// have default keys naming the payment (and the amount), so running the
// same command again never captures or voids twice; exits 0 SUCCEEDED, 3
// FAILED or CANCELED, 1 refused.
func TestCaptureAndVoid(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	manual := func(order string) string {
		t.Helper()
		r := ctl(t, s.env(), payArgs(order, "pm_card_visa", "--capture-method", "manual")...)
		require.Equal(t, 0, r.code, "%s", r)
		require.Equal(t, "AUTHORIZED", r.object(t)["status"])
		return r.object(t)["id"].(string)
	}
	id := manual("o-1")

	first := ctl(t, s.env(), "capture", id, "--amount", "300")
	require.Equal(t, 0, first.code, "%s", first)
	require.Equal(t, "ctl-capture-"+id+"-300", first.key())
	require.Equal(t, "SUCCEEDED", first.object(t)["status"])
	require.EqualValues(t, 300, first.object(t)["amount"])
	again := ctl(t, s.env(), "capture", "--amount", "300", id)
	require.Equal(t, 0, again.code, "%s", again)
	require.Equal(t, first.object(t)["id"], again.object(t)["id"], "the same capture, replayed")
	require.EqualValues(t, 1, s.sim.Stats(t).CaptureCalls)
	got := ctl(t, s.env(), "get", id)
	require.Equal(t, "SUCCEEDED", got.object(t)["status"])
	require.EqualValues(t, 300, got.object(t)["amount_captured"])
	capture := ctl(t, s.env(), "get", "--sync", first.object(t)["id"].(string))
	require.Equal(t, 0, capture.code, "%s", capture)
	require.Equal(t, first.object(t)["id"], capture.object(t)["id"])

	refused := ctl(t, s.env(), "void", id)
	require.Equal(t, 1, refused.code, "%s", refused)
	require.Equal(t, "payment_not_voidable", refused.object(t)["code"])

	other := manual("o-2")
	v := ctl(t, s.env(), "void", other, "--reason", "requested_by_customer")
	require.Equal(t, 0, v.code, "%s", v)
	require.Equal(t, "ctl-void-"+other, v.key())
	require.Equal(t, "requested_by_customer", v.object(t)["reason"])
	vAgain := ctl(t, s.env(), "void", other, "--reason", "requested_by_customer")
	require.Equal(t, v.object(t)["id"], vAgain.object(t)["id"])
	require.EqualValues(t, 1, s.sim.Stats(t).VoidCalls)
	require.Equal(t, "CANCELED", ctl(t, s.env(), "get", other).object(t)["status"])
	require.Equal(t, 0, ctl(t, s.env(), "get", v.object(t)["id"].(string)).code)

	// A capture refused as expired: FAILED (3), the payment CANCELED.
	expired := manual("o-3")
	s.sim.Expire(t, ctl(t, s.env(), "get", expired).object(t)["provider_charge_id"].(string))
	r := ctl(t, s.env(), "capture", expired)
	require.Equal(t, 3, r.code, "%s", r)
	require.Equal(t, "authorization_expired", r.object(t)["failure_code"])
	require.Equal(t, "CANCELED", ctl(t, s.env(), "get", expired).object(t)["status"])
	// pay answered CANCELED exits 3 too: a manual payment declined is FAILED.
	declined := ctl(t, s.env(), payArgs("o-4", "pm_card_declined", "--capture-method", "manual")...)
	require.Equal(t, 3, declined.code, "%s", declined)
}
