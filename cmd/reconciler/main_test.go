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
	simclient "github.com/acme/paymentsvc/internal/provider/sim"
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
	bin := proctest.Build(t).Reconciler // before the deadline: a first build on a busy machine takes a while
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stdout, stderr, code, err := proctest.Run(ctx, bin, args, env)
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
		// Refused as the pods refuse it, not silently replaced by 8s.
		"no retry budget": {"DATABASE_URL=" + db.URL, "PROVIDER_URL=" + sim, "PROVIDER_RETRY_BUDGET=0s"},
	}
	for name, env := range cases {
		for _, args := range [][]string{{"run"}, {"settle", "--day", "2026-01-01"}} {
			r := reconciler(t, append(fast, env...), args...)
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
	ch, err := simclient.NewHTTPClient("sim", simURL, "sk_sim", nil).PostCharge(ctx, provider.ChargeRequest{
		Amount: a.Amount, Currency: a.Currency, PaymentMethod: a.PaymentMethod, Reference: a.ID, IdempotencyKey: attempts.ProviderKey(a.ID),
	})
	require.NoError(t, err)
	env := []string{"DATABASE_URL=" + db.URL, "PROVIDER_URL=" + simURL}

	for _, args := range [][]string{{}, {"run", "--min-age", "1m", "--batch-size", "10"}} {
		r := reconciler(t, env, args...)
		require.Equal(t, 0, r.code, r.stderr)
		want := `{"checked":1,"succeeded":1,"failed":0,"still_unknown":0,"needs_review":0,"errors":0,"refunds":{"checked":0,"succeeded":0,"failed":0,"still_unknown":0},"captures":{"checked":0,"succeeded":0,"failed":0,"still_unknown":0},"voids":{"checked":0,"succeeded":0,"failed":0,"still_unknown":0},"expired":0,"authorized":0}` + "\n"
		if len(args) > 0 { // the second run finds nothing due
			want = `{"checked":0,"succeeded":0,"failed":0,"still_unknown":0,"needs_review":0,"errors":0,"refunds":{"checked":0,"succeeded":0,"failed":0,"still_unknown":0},"captures":{"checked":0,"succeeded":0,"failed":0,"still_unknown":0},"voids":{"checked":0,"succeeded":0,"failed":0,"still_unknown":0},"expired":0,"authorized":0}` + "\n"
		}
		require.Equal(t, want, r.stdout)
		requireJSONLogs(t, r.stderr)
	}

	day := time.Unix(ch.Created, 0).UTC().Format("2006-01-02")
	r := reconciler(t, env, "settle", "--day", day)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, `{"day":"`+day+`","provider_charges":1,"matched":1,"orphans_refunded":0,"orphans_voided":0,"amount_mismatches":0,"missing_at_provider":0,"foreign":0}`+"\n", r.stdout)

	r = reconciler(t, env, "gc")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, `{"deleted":0,"webhook_events_deleted":0,"outbox_deleted":0}`+"\n", r.stdout)
}

// reconciler gc also deletes webhook events received more than
// WEBHOOK_EVENT_TTL ago and outbox rows published more than OUTBOX_RETENTION
// ago (flags win over the environment), never an unpublished row, and prints
// what it deleted.
func TestGCPrintsWhatItDeleted(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	simURL := startSim(t)
	_, err := db.Pool.Exec(t.Context(), `
		INSERT INTO tenants (id, name, api_key_sha256) VALUES ('ten_1', 't', '\x01');
		INSERT INTO payment_attempts (id, tenant_id, order_id, idempotency_key, amount, currency, payment_method, status)
		SELECT 'pay_' || i, 'ten_1', 'o-' || i, 'k-' || i, 500, 'USD', 'pm_card_visa', 'SUCCEEDED' FROM generate_series(1, 6) AS i;
		INSERT INTO idempotency_keys (tenant_id, key, fingerprint, attempt_id, expires_at, response_code, response_body)
		SELECT 'ten_1', 'k-' || i, '\x00', 'pay_' || i, now() + interval '1 hour' * (1 - 2 * (i % 2)), 201, '{}' FROM generate_series(1, 6) AS i;
		INSERT INTO webhook_events (provider, event_id, type, outcome, payload, received_at)
		SELECT 'sim', 'evt_' || i, 'charge.succeeded', 'applied', '{}', now() - interval '1 hour' * i + interval '30 minutes' FROM generate_series(1, 50) AS i;
		INSERT INTO outbox (id, type, subject, subject_id, payment_id, payload, created_at, published_at)
		SELECT 'evt_out_' || i, 'PaymentSucceeded', 'payments.succeeded', 'pay_' || i, 'pay_' || i, '{}', now() - interval '30 days',
		       CASE WHEN i <= 4 THEN now() - interval '1 minute' * i END FROM generate_series(1, 6) AS i`)
	require.NoError(t, err)
	env := []string{"DATABASE_URL=" + db.URL, "PROVIDER_URL=" + simURL, "WEBHOOK_EVENT_TTL=24h", "OUTBOX_RETENTION=1000h"}

	// Keys of pay_1, pay_3, pay_5 expired an hour ago, the others expire in
	// an hour; events 25 to 50 are over a day old, 1 to 24 not; outbox rows 3 and 4 were published over 150s ago,
	// rows 5 and 6 never.
	r := reconciler(t, env, "gc", "--outbox-retention", "150s")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, `{"deleted":3,"webhook_events_deleted":26,"outbox_deleted":2}`+"\n", r.stdout)
	requireJSONLogs(t, r.stderr)
	var events, outbox, unpublished int
	require.NoError(t, db.Pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM webhook_events), (SELECT count(*) FROM outbox),
		(SELECT count(*) FROM outbox WHERE published_at IS NULL)`).Scan(&events, &outbox, &unpublished))
	require.Equal(t, []int{24, 4, 2}, []int{events, outbox, unpublished})

	r = reconciler(t, env, "gc", "--webhook-event-ttl", "-1h")
	require.Equal(t, 2, r.code, "a negative TTL is bad usage: %s", r.stderr)
	require.Empty(t, r.stdout)
	r = reconciler(t, nil, "gc", "-h")
	require.Contains(t, r.stderr, "--webhook-event-ttl")
	require.Contains(t, r.stderr, "--outbox-retention")
}

// --min-age 0s means no minimum (only an unset flag takes the 2m default):
// an UNKNOWN payment that changed a moment ago is resolved.
func TestRunMinAgeZeroResolvesAJustStuckPayment(t *testing.T) {
	t.Parallel()
	simURL := startSim(t)
	for _, c := range []struct {
		name string
		env  []string
		args []string
	}{
		{"flag", nil, []string{"run", "--min-age", "0s"}},
		{"env", []string{"RECONCILER_MIN_AGE=0s"}, []string{"run"}},
	} {
		db := testdb.New(t)
		ctx := t.Context()
		_, err := db.Pool.Exec(ctx, `
			INSERT INTO tenants (id, name, api_key_sha256) VALUES ('ten_1', 't', '\x01');
			INSERT INTO payment_attempts (id, tenant_id, order_id, idempotency_key, amount, currency, payment_method, status, provider)
			VALUES ('pay_`+c.name+`', 'ten_1', 'o-1', 'k-1', 500, 'USD', 'pm_card_visa', 'UNKNOWN', 'sim');
			INSERT INTO idempotency_keys (tenant_id, key, fingerprint, attempt_id, expires_at)
			VALUES ('ten_1', 'k-1', '\x00', 'pay_`+c.name+`', now() + interval '1 day')`)
		require.NoError(t, err)
		_, err = simclient.NewHTTPClient("sim", simURL, "sk_sim", nil).PostCharge(ctx, provider.ChargeRequest{
			Amount: 500, Currency: "USD", PaymentMethod: "pm_card_visa", Reference: "pay_" + c.name, IdempotencyKey: "psvc_pay_" + c.name,
		})
		require.NoError(t, err)

		r := reconciler(t, append([]string{"DATABASE_URL=" + db.URL, "PROVIDER_URL=" + simURL}, c.env...), c.args...)
		require.Equal(t, 0, r.code, "%s: %s", c.name, r.stderr)
		require.Equal(t, `{"checked":1,"succeeded":1,"failed":0,"still_unknown":0,"needs_review":0,"errors":0,"refunds":{"checked":0,"succeeded":0,"failed":0,"still_unknown":0},"captures":{"checked":0,"succeeded":0,"failed":0,"still_unknown":0},"voids":{"checked":0,"succeeded":0,"failed":0,"still_unknown":0},"expired":0,"authorized":0}`+"\n", r.stdout, c.name)
		var status string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status FROM payment_attempts WHERE id = $1`, "pay_"+c.name).Scan(&status))
		require.Equal(t, "SUCCEEDED", status, c.name)
	}
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
