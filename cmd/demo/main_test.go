package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/testdb"
)

// The demo end to end, against freshly built binaries: every scenario shows
// the behaviour of the seed notes, each order has exactly one payment, the
// provider made three charges for four calls, and the demo's database is
// gone afterwards.
func TestDemoPlaysTheSeedScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and plays every scenario with real processes; skipped with -short")
	}
	t.Parallel()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/paymentsvc", "./cmd/providersim")
	build.Dir = "../.."
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	var stdout, stderr bytes.Buffer
	code := run([]string{"--bin-dir", bin, "--database-url", testdb.AdminURL()}, &stdout, &stderr)
	text := stdout.String()
	t.Logf("demo output:\n%s", text)
	require.Equal(t, 0, code, "stderr: %s", stderr.String())

	require.Contains(t, text, "attempt 1 -> pod A: client TIMEOUT")
	require.Regexp(t, `attempt \d -> 201 \{"pod":"B","order_id":"o-1","status":"SUCCEEDED","charge":"ch_\w+","replayed":true\}`, text)
	require.Contains(t, text, `422 {"pod":"A","code":"idempotency_key_reused"}`)
	require.Contains(t, text, "pod A CRASHED (exit status 137)")
	require.Contains(t, text, `retry now -> 409 {"pod":"B","code":"idempotency_key_in_use"`)
	require.Regexp(t, `retry after lock expiry -> 201 \{"pod":"B","order_id":"o-4","status":"SUCCEEDED","charge":"ch_\w+","replayed":false\}`, text)
	require.Contains(t, text, "same charge as the one pod A got: true")

	var orders []orderTally
	require.NoError(t, json.Unmarshal([]byte(lineAfter(t, text, "our payments: ")), &orders))
	require.Len(t, orders, 3)
	charges := map[string]bool{}
	for i, want := range []string{"o-1", "o-2", "o-4"} {
		require.Equal(t, want, orders[i].OrderID)
		require.Equal(t, 1, orders[i].Payments, "payments of %s", want)
		require.NotEmpty(t, orders[i].Charge)
		charges[orders[i].Charge] = true
	}
	require.Len(t, charges, 3, "one distinct charge per order")
	require.Equal(t, "3 distinct charges for 4 calls", lineAfter(t, text, "provider: "))

	name := regexp.MustCompile(`database (payments_demo_\d+_\d+)`).FindStringSubmatch(text)
	require.NotNil(t, name, "the demo names its database")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testdb.AdminURL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	var exists bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name[1]).Scan(&exists))
	require.False(t, exists, "the demo drops its database")
}

func TestDemoUsage(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"-h"}, &out, &errOut))
	require.Contains(t, errOut.String(), "--bin-dir")
	require.Equal(t, 2, run([]string{"--no-such-flag"}, &out, &errOut))
	require.Equal(t, 2, run([]string{"extra"}, &out, &errOut))
}

// lineAfter returns the rest of the output line that starts with prefix.
func lineAfter(t *testing.T, text, prefix string) string {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			return rest
		}
	}
	require.Failf(t, "line not found", "no line starting with %q in:\n%s", prefix, text)
	return ""
}
