package main_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

type result struct {
	code           int
	stdout, stderr string
}

// reconciler runs the binary with env added to childproc.Env(), which
// holds none of the services' settings.
func reconciler(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stdout, stderr, code, err := proctest.Run(ctx, proctest.Build(t).Reconciler, args, env)
	require.NoError(t, err, "run reconciler %v", args)
	return result{code: code, stdout: stdout, stderr: stderr}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}, {"run", "-h"}, {"settle", "-h"}, {"gc", "-h"}} {
		r := reconciler(t, []string{"PROVIDER_API_KEY=sk_secret_value", "DATABASE_URL=postgres://u:pw_secret@h/db"}, args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		for _, cmd := range []string{"run", "settle", "gc", "--database-url", "--provider-url"} {
			require.Contains(t, r.stderr, cmd, args)
		}
		require.NotContains(t, r.stderr, "secret", "-h never prints credentials")
		require.Empty(t, r.stdout)
	}
	r := reconciler(t, nil, "run", "-h")
	require.Contains(t, r.stderr, "--min-age")
	require.Contains(t, r.stderr, "--batch-size")
	r = reconciler(t, nil, "settle", "-h")
	require.Contains(t, r.stderr, "--day")
}

func TestBadUsageExits2(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env  []string
		args []string
	}{
		{nil, []string{"--no-such-flag"}},
		{nil, []string{"frobnicate"}},
		{nil, []string{"run", "extra"}},
		{nil, []string{"settle"}},
		{nil, []string{"settle", "--day", "2026-02-30"}},
		{nil, []string{"settle", "--day", "yesterday"}},
		{nil, []string{"run", "--batch-size", "0"}},
		{nil, []string{"run", "--min-age", "soon"}},
		{[]string{"RECONCILER_MIN_AGE=soon"}, []string{"run"}},
		{[]string{"PROVIDER_CALL_TIMEOUT=3"}, []string{"gc"}},
	}
	for _, c := range cases {
		r := reconciler(t, c.env, c.args...)
		require.Equal(t, 2, r.code, "%v %v: %s", c.env, c.args, r.stderr)
		require.Empty(t, r.stdout)
	}
}

func TestCannotRunExits1(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	sim := startSim(t)
	fast := []string{"PROVIDER_CALL_TIMEOUT=200ms", "PROVIDER_RETRY_BUDGET=300ms"}
	cases := map[string][]string{
		"database unreachable":     {"DATABASE_URL=" + testkit.RefusedURL(t, "postgres") + "/payments?sslmode=disable", "PROVIDER_URL=" + sim},
		"provider unreachable":     {"DATABASE_URL=" + db.URL, "PROVIDER_URL=" + testkit.RefusedURL(t, "http")},
		"lock shorter than a call": {"DATABASE_URL=" + db.URL, "PROVIDER_URL=" + sim, "IDEMPOTENCY_LOCK_TTL=400ms"},
	}
	for name, env := range cases {
		for _, args := range [][]string{{"run"}, {"settle", "--day", "2026-01-01"}} {
			r := reconciler(t, append(env, fast...), args...)
			cmd := args[0]
			require.Equal(t, 1, r.code, "%s %s: %s", name, cmd, r.stderr)
			require.Empty(t, r.stdout, "%s %s", name, cmd)
			require.Contains(t, r.stderr, `"level":"ERROR"`, "%s %s", name, cmd)
		}
	}
	r := reconciler(t, cases["database unreachable"], "gc")
	require.Equal(t, 1, r.code, r.stderr)
	require.Empty(t, r.stdout)
}

func TestJobsPrintOneJSONLine(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	simURL := startSim(t)
	ctx := t.Context()
	// One UNKNOWN payment, unchanged for 10 minutes, that the provider charged.
	a := testdb.Attempt(t, db.Pool, testdb.AttemptOpts{Status: attempts.Unknown, Age: 10 * time.Minute})
	ch, err := provider.NewHTTPClient("sim", simURL, "sk_sim", nil).PostCharge(ctx, provider.ChargeRequest{
		Amount: a.Amount, Currency: a.Currency, PaymentMethod: a.PaymentMethod, Reference: a.ID, IdempotencyKey: attempts.ProviderKey(a.ID),
	})
	require.NoError(t, err)
	env := []string{"DATABASE_URL=" + db.URL, "PROVIDER_URL=" + simURL}

	for _, args := range [][]string{{}, {"run", "--min-age", "1m", "--batch-size", "10"}} {
		r := reconciler(t, env, args...)
		require.Equal(t, 0, r.code, r.stderr)
		want := `{"checked":1,"succeeded":1,"failed":0,"still_unknown":0,"needs_review":0,"errors":0}` + "\n"
		if len(args) > 0 { // the second run finds nothing due
			want = `{"checked":0,"succeeded":0,"failed":0,"still_unknown":0,"needs_review":0,"errors":0}` + "\n"
		}
		require.Equal(t, want, r.stdout)
		requireJSONLogs(t, r.stderr)
	}

	day := time.Unix(ch.Created, 0).UTC().Format("2006-01-02")
	r := reconciler(t, env, "settle", "--day", day)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, `{"day":"`+day+`","provider_charges":1,"matched":1,"orphans_refunded":0,"amount_mismatches":0,"missing_at_provider":0}`+"\n", r.stdout)

	r = reconciler(t, env, "gc")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, `{"deleted":0}`+"\n", r.stdout)
}

// requireJSONLogs asserts that every stderr line is a JSON object.
func requireJSONLogs(t *testing.T, stderr string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if line == "" {
			continue
		}
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &v), line)
	}
}

func startSim(t *testing.T) string {
	t.Helper()
	return proctest.ServeSim(t, providersim.Config{APIKey: "sk_sim"}, nil).URL()
}
