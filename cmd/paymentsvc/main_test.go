package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/db/migrations"
	"github.com/acme/paymentsvc/internal/childproc"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// runCLI runs paymentsvc with args and env to completion.
func runCLI(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	bin := proctest.Build(t).PaymentSvc
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// No console unless the test asks for one: tests run side by side.
	env = append([]string{"CONSOLE_ADDR=off"}, env...)
	stdout, stderr, code, err := proctest.Run(ctx, bin, args, env)
	require.NoError(t, err, "paymentsvc %v", args)
	return stdout, stderr, code
}

// refusedAtStartup runs serve with settings added to a fresh empty database,
// a free port and a provider that refuses connections; it requires exit
// status 1 with exactly one log line, and returns that line and stderr.
func refusedAtStartup(t *testing.T, settings ...string) (logLine, string) {
	t.Helper()
	_, stderr, code := runCLI(t, append([]string{
		"DATABASE_URL=" + testdb.NewEmpty(t), "HTTP_ADDR=127.0.0.1:0", "PROVIDER_URL=" + testkit.RefusedURL(t, "http"),
	}, settings...), "serve")
	require.Equal(t, 1, code, "%v, stderr: %s", settings, stderr)
	lines := logLines(stderr)
	require.Len(t, lines, 1, "exactly one log line: %s", stderr)
	return lines[0], stderr
}

// logLine is the part of a JSON log line the tests look at.
type logLine struct {
	Level string `json:"level"`
	Msg   string `json:"msg"`
	Raw   string `json:"-"`
}

// logLines parses the JSON log lines in stderr, ignoring anything else
// (usage text, flag errors).
func logLines(stderr string) []logLine {
	var out []logLine
	for _, l := range strings.Split(stderr, "\n") {
		var ll logLine
		if json.Unmarshal([]byte(l), &ll) == nil && ll.Msg != "" {
			ll.Raw = l
			out = append(out, ll)
		}
	}
	return out
}

func countMsg(lines []logLine, msg string) int {
	n := 0
	for _, l := range lines {
		if l.Msg == msg {
			n++
		}
	}
	return n
}

// migrationVersions are the versions of the migration files, in order.
func migrationVersions(t *testing.T) []int64 {
	t.Helper()
	files, err := fs.Glob(migrations.FS, "*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var out []int64
	for _, f := range files {
		digits, _, ok := strings.Cut(f, "_")
		require.True(t, ok, "migration file %s is VERSION_name.sql", f)
		v, err := strconv.ParseInt(digits, 10, 64)
		require.NoError(t, err, "migration file %s", f)
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// appliedMigrations reads goose's version table of the database at url:
// the version of every row that records an applied migration, in the order
// they were applied (goose's own row for version 0 left out), and the
// highest row id, which grows with every row goose adds.
func appliedMigrations(t *testing.T, url string) (versions []int64, lastRow int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT version_id FROM goose_db_version WHERE version_id > 0 AND is_applied ORDER BY id`)
	require.NoError(t, err)
	versions, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.NoError(t, conn.QueryRow(ctx, `SELECT max(id) FROM goose_db_version`).Scan(&lastRow))
	return versions, lastRow
}

func TestUsageAndBadArguments(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"help", []string{"-h"}, 0},
		{"help long", []string{"--help"}, 0},
		{"serve help", []string{"serve", "-h"}, 0},
		{"bogus flag", []string{"--bogus"}, 2},
		{"serve bogus flag", []string{"serve", "--bogus"}, 2},
		{"unknown subcommand", []string{"frobnicate"}, 2},
		{"tenant without create", []string{"tenant"}, 2},
		{"tenant unknown", []string{"tenant", "delete"}, 2},
		{"tenant create without name", []string{"tenant", "create"}, 2},
		{"tenant create blank name", []string{"tenant", "create", "--name", "  "}, 2},
		{"extra arguments", []string{"migrate", "extra"}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runCLI(t, nil, c.args...)
			require.Equal(t, c.code, code, "paymentsvc %v\nstdout: %s\nstderr: %s", c.args, stdout, stderr)
			if c.code == 0 {
				require.Contains(t, stderr+stdout, "Usage")
				require.Contains(t, stderr+stdout, "--database-url")
			}
		})
	}
}

// -h prints the settings' values from the environment: the URLs without
// their credentials (a password, a token as the whole user info, a token
// query parameter), the secrets not at all.
func TestUsageHidesCredentialsInURLs(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := runCLI(t, []string{
		"NATS_URL=nats://u:s3cret@h:4222,nats://t0ken_s3cret@h2:4222",
		"PROVIDER_URL=http://u:s3cret@h",
		"DATABASE_URL=postgres://app:s3cret@db:5432/payments?sslmode=require",
		"PROVIDER_API_KEY=sk_s3cret", "WEBHOOK_SECRETS=whsec_s3cret",
	}, "-h")
	require.Equal(t, 0, code, stderr)
	out := stdout + stderr
	require.NotContains(t, out, "s3cret")
	for _, masked := range []string{
		`"nats://u:***@h:4222,nats://***@h2:4222"`, `"http://u:***@h"`,
		`"postgres://app:***@db:5432/payments?sslmode=require"`,
	} {
		require.Contains(t, out, masked)
	}
}

// The outbox relay logs the NATS URL, and the error that quotes it, masked.
func TestRelayLogHidesNATSCredentials(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	// The port is not a number: every connection attempt fails with an
	// error that quotes the whole URL, and is logged.
	p := proctest.StartPod(t, proctest.PodOptions{DatabaseURL: d.URL, ProviderURL: testkit.RefusedURL(t, "http"), Env: []string{
		"OUTBOX_RELAY=on", "NATS_URL=nats://u:s3cret@127.0.0.1:notaport",
	}})
	testkit.Eventually(t, time.Minute, "the relay logs its failed connection", func() bool {
		return countMsg(logLines(p.Logs()), "connect to NATS") > 0
	})
	for _, l := range logLines(p.Logs()) {
		if l.Msg == "connect to NATS" {
			require.Contains(t, l.Raw, `"url":"(redacted connection string)"`)
		}
	}
	require.NotContains(t, p.Logs(), "s3cret")
}

// `paymentsvc healthcheck` (the image's HEALTHCHECK: distroless has no
// curl) exits 0 when /healthz at HTTP_ADDR answers 200, a wildcard host
// meaning loopback, or when --url does; 1 when nothing answers or not 200.
func TestHealthcheck(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	p := proctest.StartPod(t, proctest.PodOptions{DatabaseURL: d.URL, ProviderURL: testkit.RefusedURL(t, "http")})
	_, port, err := net.SplitHostPort(p.Addr())
	require.NoError(t, err)
	closed := testkit.ReservedAddr(t) // nothing listens there
	for _, c := range []struct {
		env  []string
		args []string
		code int
	}{
		{[]string{"HTTP_ADDR=" + p.Addr()}, nil, 0},
		{[]string{"HTTP_ADDR=0.0.0.0:" + port}, nil, 0},
		{[]string{"HTTP_ADDR=[::]:" + port}, nil, 0},
		{nil, []string{"--http-addr", ":" + port}, 0},
		{nil, []string{"--url", p.URL() + "/readyz"}, 0},
		{[]string{"HTTP_ADDR=" + closed}, nil, 1},
		{[]string{"HTTP_ADDR=127.0.0.1:0"}, nil, 1},
		{nil, []string{"--url", p.URL() + "/no-such-endpoint"}, 1},
	} {
		stdout, stderr, code := runCLI(t, c.env, append([]string{"healthcheck"}, c.args...)...)
		require.Equal(t, c.code, code, "%v %v: %s", c.env, c.args, stderr)
		require.Empty(t, stdout)
		if c.code != 0 {
			require.Contains(t, stderr, "healthcheck: ", "%v %v: says why", c.env, c.args)
		}
	}
	_, stderr, code := runCLI(t, nil, "-h")
	require.Equal(t, 0, code)
	require.Contains(t, stderr, "paymentsvc healthcheck")
	require.Contains(t, stderr, "--url")
}

func TestMigrateCreatesDatabaseThenIsANoOp(t *testing.T) {
	t.Parallel()
	url := testdb.NewEmpty(t)
	env := []string{"DATABASE_URL=" + url}

	_, stderr, code := runCLI(t, env, "migrate")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	applied, lastRow := appliedMigrations(t, url)
	require.Equal(t, migrationVersions(t), applied, "every migration applied once, in order")
	// Each is logged with its duration as text ("1.2ms"), like every
	// duration in the logs, not as integer nanoseconds.
	require.Equal(t, len(applied), countMsg(logLines(stderr), "migration applied"))
	for _, l := range logLines(stderr) {
		if l.Msg == "migration applied" {
			var f struct{ Duration any }
			require.NoError(t, json.Unmarshal([]byte(l.Raw), &f))
			d, ok := f.Duration.(string)
			require.True(t, ok, "duration as text: %s", l.Raw)
			_, err := time.ParseDuration(d)
			require.NoError(t, err, "%s", l.Raw)
		}
	}

	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err, "the database exists after migrate")
	var tables int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'
		AND tablename IN ('tenants', 'payment_attempts', 'payment_attempt_events', 'idempotency_keys', 'outbox')`).Scan(&tables))
	require.NoError(t, conn.Close(context.Background()))
	require.Equal(t, 5, tables)

	_, stderr, code = runCLI(t, env, "migrate")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	again, lastRowAgain := appliedMigrations(t, url)
	require.Equal(t, applied, again, "second migrate applies nothing")
	require.Equal(t, lastRow, lastRowAgain, "second migrate writes no row to goose's table")
}

func TestRefusesLockTTLNotLongerThanProviderTime(t *testing.T) {
	t.Parallel()
	for _, lockTTL := range []string{"5s", "11s"} { // 11s = budget + call timeout: not longer
		// One clear line (docs/configuration.md): the error, naming the setting.
		line, stderr := refusedAtStartup(t, "IDEMPOTENCY_LOCK_TTL="+lockTTL, "PROVIDER_RETRY_BUDGET=8s", "PROVIDER_CALL_TIMEOUT=3s")
		require.Equal(t, "ERROR", line.Level)
		require.Contains(t, line.Raw, "IDEMPOTENCY_LOCK_TTL")
		require.NotContains(t, stderr, `"msg":"listening"`)
	}
}

// A key must outlive its lock (§19): IDEMPOTENCY_KEY_TTL not longer than
// IDEMPOTENCY_LOCK_TTL is refused at startup, with one line naming both.
func TestRefusesKeyTTLNotLongerThanLockTTL(t *testing.T) {
	t.Parallel()
	for _, keyTTL := range []string{"20s", "30s"} { // 30s = the lock TTL: not longer
		line, stderr := refusedAtStartup(t, "IDEMPOTENCY_KEY_TTL="+keyTTL, "IDEMPOTENCY_LOCK_TTL=30s")
		require.Equal(t, "ERROR", line.Level)
		require.Contains(t, line.Raw, "IDEMPOTENCY_KEY_TTL")
		require.Contains(t, line.Raw, "IDEMPOTENCY_LOCK_TTL")
		require.NotContains(t, stderr, `"msg":"listening"`)
	}
}

// DATABASE_TIMEOUT is listed by -h with its default, and a timeout that
// bounds nothing is refused at startup.
func TestDatabaseTimeoutSetting(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := runCLI(t, nil, "-h")
	require.Equal(t, 0, code)
	require.Regexp(t, `--database-timeout duration\n\s+bound of every wait on the database[^\n]*\(env DATABASE_TIMEOUT\) \(default "5s"\)`, stdout+stderr)
	for _, d := range []string{"0s", "-1s"} {
		line, _ := refusedAtStartup(t, "DATABASE_TIMEOUT="+d)
		require.Contains(t, line.Raw, "DATABASE_TIMEOUT")
	}
}

// Durations that no default makes right are refused at startup (exit 1, one
// line naming the setting); 0s is legal and kept (no drain delay).
func TestRefusesNegativeShutdownDurations(t *testing.T) {
	t.Parallel()
	for _, env := range []string{"SHUTDOWN_DRAIN_DELAY=-1s", "SHUTDOWN_TIMEOUT=-1s"} {
		line, _ := refusedAtStartup(t, env)
		require.Contains(t, line.Raw, "SHUTDOWN_DRAIN_DELAY")
	}
}

func TestTenantCreatePrintsKeyOnceAndStoresOnlyItsHash(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	stdout, stderr, code := runCLI(t, []string{"DATABASE_URL=" + d.URL}, "tenant", "create", "--name", "x")
	require.Equal(t, 0, code, "stderr: %s", stderr)

	require.Equal(t, 1, strings.Count(strings.TrimRight(stdout, "\n"), "\n")+1, "one line: %q", stdout)
	var out map[string]any
	dec := json.NewDecoder(strings.NewReader(stdout))
	require.NoError(t, dec.Decode(&out))
	require.False(t, dec.More(), "one JSON object: %q", stdout)
	require.Len(t, out, 3, "fields: %v", out)
	id, _ := out["tenant_id"].(string)
	key, _ := out["api_key"].(string)
	require.NotEmpty(t, id)
	require.Equal(t, "x", out["name"])
	require.True(t, strings.HasPrefix(key, "sk_"), "api_key %q", key)
	require.Greater(t, len(key), len("sk_")+16)

	var stored []byte
	var name string
	require.NoError(t, d.Pool.QueryRow(t.Context(), "SELECT name, api_key_sha256 FROM tenants WHERE id = $1", id).Scan(&name, &stored))
	sum := sha256.Sum256([]byte(key))
	require.Equal(t, sum[:], stored)
	require.Equal(t, "x", name)
	var leaks int
	require.NoError(t, d.Pool.QueryRow(t.Context(),
		"SELECT count(*) FROM tenants t WHERE strpos(row_to_json(t)::text, $1) > 0 OR strpos(encode(t.api_key_sha256, 'escape'), $1) > 0",
		key).Scan(&leaks))
	require.Zero(t, leaks, "the key's plaintext is stored nowhere in tenants")
	require.NotContains(t, stderr, key, "the key is not logged")

	// A second tenant gets another key.
	stdout2, _, code := runCLI(t, []string{"DATABASE_URL=" + d.URL}, "tenant", "create", "--name", "x")
	require.Equal(t, 0, code)
	require.NotEqual(t, stdout, stdout2)
}

func TestSigtermOnIdleServeExitsZero(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	p := proctest.StartPod(t, proctest.PodOptions{DatabaseURL: d.URL, ProviderURL: testkit.RefusedURL(t, "http")})
	require.Equal(t, http.StatusOK, proctest.NewClient(p.URL(), "").MustGet(t, "/healthz").Status)

	require.NoError(t, p.Signal(syscall.SIGTERM))
	code, err := p.Wait(time.Minute)
	require.NoError(t, err)
	require.Equal(t, 0, code, "logs: %s", p.Logs())
	lines := logLines(p.Logs())
	require.Equal(t, 1, countMsg(lines, "stopped"), "logs: %s", p.Logs())
	for _, l := range lines {
		require.NotEqual(t, "ERROR", l.Level, "no error on a clean stop: %s", l.Raw)
	}
}

// Two pods started at the same moment on a database that does not exist
// yet: both create it (one of them wins), migrate one after the other under
// the advisory lock (the schema is applied once), and serve.
func TestTwoServesStartTogetherOnEmptyDatabase(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t).PaymentSvc
	url := testdb.NewEmpty(t)
	env := []string{
		"DATABASE_URL=" + url, "HTTP_ADDR=127.0.0.1:0", "CONSOLE_ADDR=off",
		"PROVIDER_URL=" + testkit.RefusedURL(t, "http"), "OUTBOX_RELAY=off",
	}
	// childproc.Start waits for each pod's "listening" line (up to its
	// StartTimeout), so the pods are started from goroutines released
	// together; proctest.StartProcess would fail t from them.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	pods := make([]*childproc.Proc, 2)
	errs := make([]error, 2)
	testkit.Together(2, func(i int) {
		pods[i], errs[i] = childproc.Start(ctx, fmt.Sprintf("pod-%d", i), bin, []string{"serve"}, env)
	})
	for _, p := range pods {
		if p != nil {
			t.Cleanup(p.Kill)
		}
	}
	for i, err := range errs {
		require.NoError(t, err, "pod %d", i)
	}
	for i, p := range pods {
		c := proctest.NewClient(p.URL(), "")
		require.Equal(t, http.StatusOK, c.MustGet(t, "/healthz").Status, "pod %d", i)
		require.Equal(t, http.StatusOK, c.MustGet(t, "/readyz").Status, "pod %d", i)
	}
	applied, _ := appliedMigrations(t, url)
	require.Equal(t, migrationVersions(t), applied, "each migration applied once:\n%s\n%s", pods[0].Logs(), pods[1].Logs())
}

// TENANT_RATE_LIMIT and TENANT_RATE_BURST are shown by -h; a negative value
// (or a limit whose bucket takes over a year to refill) is refused at startup (exit 1, one line naming the setting), a malformed
// one as bad usage (exit 2).
func TestTenantRateLimitSettings(t *testing.T) {
	t.Parallel()
	_, help, code := runCLI(t, nil, "-h")
	require.Equal(t, 0, code)
	require.Contains(t, help, "--tenant-rate-limit")
	require.Contains(t, help, "--tenant-rate-burst")
	require.Contains(t, help, "OTEL_EXPORTER_OTLP_ENDPOINT")

	// A limit so small that a bucket would take years to refill (and far
	// smaller, overflow the limiter's arithmetic and switch it off).
	for _, env := range []string{"TENANT_RATE_LIMIT=-1", "TENANT_RATE_BURST=-2", "TENANT_RATE_LIMIT=1e-10"} {
		line, stderr := refusedAtStartup(t, env)
		require.Contains(t, line.Raw, "TENANT_RATE_")
		require.NotContains(t, stderr, `"msg":"listening"`)
	}
	for _, env := range []string{"TENANT_RATE_LIMIT=fast", "TENANT_RATE_LIMIT=NaN", "TENANT_RATE_BURST=1.5"} {
		_, stderr, code := runCLI(t, []string{"HTTP_ADDR=127.0.0.1:0", env}, "serve")
		require.Equal(t, 2, code, "%s, stderr: %s", env, stderr)
		require.Contains(t, stderr, strings.SplitN(env, "=", 2)[0])
	}
	_, stderr, code := runCLI(t, nil, "serve", "--tenant-rate-limit", "-0.5", "--database-url", testdb.NewEmpty(t), "--http-addr", "127.0.0.1:0")
	require.Equal(t, 1, code, "stderr: %s", stderr)
	require.Contains(t, stderr, "TENANT_RATE_LIMIT")
}

// httpGet GETs url and returns the status and the body.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// PPROF_ADDR serves net/http/pprof on a listener of its own; the API's
// listener does not serve it. Unset, nothing listens for it.
func TestPprofOnItsOwnListener(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	addr := testkit.ReservedAddr(t)
	p := proctest.StartPod(t, proctest.PodOptions{DatabaseURL: d.URL, ProviderURL: testkit.RefusedURL(t, "http"), Env: []string{
		"OUTBOX_RELAY=off", "PPROF_ADDR=" + addr,
	}})
	code, body := httpGet(t, "http://"+addr+"/debug/pprof/")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "goroutine")
	code, body = httpGet(t, "http://"+addr+"/debug/pprof/heap?debug=1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "heap profile")
	code, _ = httpGet(t, p.URL()+"/debug/pprof/")
	require.Equal(t, http.StatusNotFound, code, "the API does not serve profiles")
	require.Equal(t, 1, countMsg(logLines(p.Logs()), "pprof listening"))
}

// METRICS_ADDR serves GET /metrics on a listener of its own, and the API's
// listener then answers it 404; unset, /metrics stays on the API's listener
// (the default). -h lists the setting.
func TestMetricsOnItsOwnListener(t *testing.T) {
	t.Parallel()
	_, help, code := runCLI(t, nil, "-h")
	require.Equal(t, 0, code)
	require.Contains(t, help, "--metrics-addr")

	d := testdb.New(t)
	addr := testkit.ReservedAddr(t)
	p := proctest.StartPod(t, proctest.PodOptions{DatabaseURL: d.URL, ProviderURL: testkit.RefusedURL(t, "http"), Env: []string{
		"OUTBOX_RELAY=off", "METRICS_ADDR=" + addr,
	}})
	code, body := httpGet(t, "http://"+addr+"/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "# TYPE paymentsvc_attempts_backlog_up gauge")
	require.Contains(t, body, "go_goroutines")
	code, _ = httpGet(t, "http://"+addr+"/healthz")
	require.Equal(t, http.StatusNotFound, code, "the metrics listener serves /metrics alone")
	code, body = httpGet(t, p.URL()+"/metrics")
	require.Equal(t, http.StatusNotFound, code, "the API no longer serves /metrics: %s", body)
	require.Contains(t, body, `"code":"not_found"`)
	code, _ = httpGet(t, p.URL()+"/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, 1, countMsg(logLines(p.Logs()), "metrics listening"))

	plain := proctest.StartPod(t, proctest.PodOptions{DatabaseURL: d.URL, ProviderURL: testkit.RefusedURL(t, "http"), Env: []string{"OUTBOX_RELAY=off"}})
	code, body = httpGet(t, plain.URL()+"/metrics")
	require.Equal(t, http.StatusOK, code, "unset, /metrics is on the API's listener")
	require.Contains(t, body, "# TYPE paymentsvc_attempts_backlog_up gauge")
	require.Zero(t, countMsg(logLines(plain.Logs()), "metrics listening"))
}

// The merchant webhooks' settings are shown by -h; a retry schedule that is
// not a list of positive durations, a timeout that is not positive or a bad
// concurrency is refused at startup (exit 1, one line naming the setting),
// a malformed on/off or duration as bad usage (exit 2).
func TestMerchantWebhookSettings(t *testing.T) {
	t.Parallel()
	_, help, code := runCLI(t, nil, "-h")
	require.Equal(t, 0, code)
	for _, flag := range []string{"--merchant-webhooks", "--merchant-webhook-timeout", "--merchant-webhook-retry-schedule",
		"--merchant-webhook-allow-private", "--merchant-webhook-allow-http", "--merchant-webhook-concurrency",
		"--merchant-webhook-endpoint-concurrency", "5s,5m,30m,2h,5h,10h,10h"} {
		require.Contains(t, help, flag)
	}
	for _, env := range []string{"MERCHANT_WEBHOOK_RETRY_SCHEDULE=5s,soon", "MERCHANT_WEBHOOK_RETRY_SCHEDULE=0s",
		"MERCHANT_WEBHOOK_TIMEOUT=-1s", "MERCHANT_WEBHOOK_CONCURRENCY=-1", "MERCHANT_WEBHOOK_ENDPOINT_CONCURRENCY=1000"} {
		line, stderr := refusedAtStartup(t, env)
		require.Contains(t, line.Raw, strings.SplitN(env, "=", 2)[0], env)
		require.NotContains(t, stderr, `"msg":"listening"`)
	}
	for _, env := range []string{"MERCHANT_WEBHOOKS=maybe", "MERCHANT_WEBHOOK_TIMEOUT=soon"} {
		_, stderr, code := runCLI(t, []string{"HTTP_ADDR=127.0.0.1:0", env}, "serve")
		require.Equal(t, 2, code, "%s, stderr: %s", env, stderr)
		require.Contains(t, stderr, strings.SplitN(env, "=", 2)[0])
	}
}
