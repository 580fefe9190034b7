package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
// the behaviour docs/failure-scenarios.md describes, each order has exactly
// one payment, the provider made three charges for four calls; a refund whose answer was lost
// is refunded once; with sim_a killed, new payments fail over to sim_b while
// the payment sim_a may have charged stays there and is resolved there; every
// paid order has exactly one charge across both providers; a manual
// payment's capture whose answer was lost is captured once; and the demo's
// database is gone afterwards.
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
	require.Regexp(t, `attempt \d -> 201 \{"pod":"B","order_id":"o-1","status":"SUCCEEDED","provider":"sim_a","charge":"ch_\w+","replayed":true\}`, text)
	require.Contains(t, text, `422 {"pod":"A","code":"idempotency_key_reused"}`)
	require.Contains(t, text, "pod A CRASHED (exit status 137)")
	require.Contains(t, text, `retry now -> 409 {"pod":"B","code":"idempotency_key_in_use"`)
	require.Regexp(t, `retry after lock expiry -> 201 \{"pod":"B","order_id":"o-4","status":"SUCCEEDED","provider":"sim_a","charge":"ch_\w+","replayed":false\}`, text)
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

	// 5: the refund's answer is lost (202 UNKNOWN); the retry with the same
	// key resumes the same refund, the next replays it; the provider made one.
	first := regexp.MustCompile(`refund attempt 1 -> 202 \{"pod":"A","refund_id":"(rfd_\w+)","status":"UNKNOWN","amount":200,"replayed":false\}`).FindStringSubmatch(text)
	require.NotNil(t, first, "the lost refund answer is UNKNOWN")
	require.Regexp(t, `refund retry, same key -> 201 \{"pod":"B","refund_id":"`+first[1]+`","status":"SUCCEEDED","amount":200,"provider_refund_id":"re_\w+","replayed":false\}`, text)
	require.Contains(t, text, "same refund as attempt 1: true")
	require.Regexp(t, `refund retry again -> 201 \{"pod":"A","refund_id":"`+first[1]+`","status":"SUCCEEDED","amount":200,"provider_refund_id":"re_\w+","replayed":true\}`, text)
	require.Regexp(t, `provider sim_a: 1 refund made for \d+ refund calls; charge ch_\w+ refunded 200 of 500`, text)
	require.Contains(t, text, "payment o-5: status SUCCEEDED, amount_refunded 200, amount_refundable 300")

	// 6: routing, the lost charge answer pinned to sim_a, failover of new
	// payments to sim_b, the pinned payment's 503 while sim_a is down and its
	// resolution at sim_a once it is back.
	require.Contains(t, text, `PUT /v1/routing -> 200 {"rules":[{"currency":"EUR","providers":["sim_b","sim_a"]},{"providers":["sim_a","sim_b"]}]}`)
	require.Regexp(t, `pay o-6 \(USD\) -> 201 \{"pod":"A","order_id":"o-6","status":"SUCCEEDED","provider":"sim_a"`, text)
	require.Regexp(t, `pay o-7 \(EUR\) -> 201 \{"pod":"B","order_id":"o-7","status":"SUCCEEDED","provider":"sim_b"`, text)
	require.Regexp(t, `pay o-8 \(USD\) -> 202 \{"pod":"B","order_id":"o-8","status":"UNKNOWN","provider":"sim_a","replayed":false\}`, text)
	require.Contains(t, text, "sim_a KILLED (exit status 137)")
	for i := 9; i <= 14; i++ {
		require.Regexp(t, fmt.Sprintf(`pay o-%d \(USD\) -> 201 \{"pod":"[AB]","order_id":"o-%d","status":"SUCCEEDED","provider":"sim_b"`, i, i), text)
	}
	require.Contains(t, text, "audit trail of o-9: CREATED (created) → PENDING (calling provider sim_a) → CREATED (not_sent) → PENDING (calling provider sim_b) → SUCCEEDED")
	require.Regexp(t, `retry o-8 while sim_a is down -> 503 \{"pod":"A","code":"provider_unavailable","retry_after":\d+\}`, text)
	require.Contains(t, text, "charges of o-8 at sim_b: 0")
	require.Regexp(t, `retry o-8 once sim_a is back -> 201 \{"pod":"A","order_id":"o-8","status":"SUCCEEDED","provider":"sim_a","charge":"ch_\w+","replayed":false\}`, text)
	require.Contains(t, text, "same charge as the one sim_a made when its answer was lost: true")
	require.Contains(t, text, "sim_a is back: new payments go to it again: true")

	// The account across both providers: one charge per paid order, at the
	// provider the payment records, none of no payment.
	var every []providerTally
	require.NoError(t, json.Unmarshal([]byte(lineAfter(t, text, "every order: ")), &every))
	require.Len(t, every, 14, "o-1, o-2, o-4, o-5, o-6 … o-15")
	perProvider := map[string]int{}
	for _, o := range every {
		require.Equal(t, "SUCCEEDED", o.Status, "%+v", o)
		require.Equal(t, 1, o.Charges["sim_a"]+o.Charges["sim_b"], "one charge for %+v", o)
		require.Equal(t, 1, o.Charges[o.Provider], "the charge is at the payment's provider: %+v", o)
		perProvider[o.Provider]++
	}
	require.Equal(t, map[string]int{"sim_a": 7, "sim_b": 7}, perProvider)
	require.Equal(t, "sim_a 7 charges, sim_b 7 charges, 0 of no payment; 14 paid orders, each charged exactly once, at its provider: true",
		lineAfter(t, text, "providers: "))

	// 7: authorize now, capture later; the capture's answer is lost (202
	// UNKNOWN, the payment still AUTHORIZED); the retry with the same key
	// resumes the same capture, the next replays it; captured once.
	require.Regexp(t, `pay o-16 \(capture_method manual\) -> 201 \{"pod":"A","order_id":"o-16","status":"AUTHORIZED","provider":"sim_a","charge":"ch_\w+","replayed":false\}`, text)
	firstCapture := regexp.MustCompile(`capture attempt 1 -> 202 \{"pod":"A","capture_id":"(cap_\w+)","status":"UNKNOWN","amount":500,"replayed":false\}`).FindStringSubmatch(text)
	require.NotNil(t, firstCapture, "the lost capture answer is UNKNOWN")
	require.Contains(t, text, "payment o-16 meanwhile: status AUTHORIZED, amount_capturable 800")
	require.Regexp(t, `capture retry, same key -> 201 \{"pod":"B","capture_id":"`+firstCapture[1]+`","status":"SUCCEEDED","amount":500,"replayed":false\}`, text)
	require.Contains(t, text, "same capture as attempt 1: true")
	require.Regexp(t, `capture retry again -> 201 \{"pod":"A","capture_id":"`+firstCapture[1]+`","status":"SUCCEEDED","amount":500,"replayed":true\}`, text)
	require.Regexp(t, `provider sim_a: charge ch_\w+ captured 500 of 800 authorized, for \d+ capture calls`, text)
	require.Contains(t, text, "payment o-16: status SUCCEEDED, amount_captured 500, amount_refundable 500")

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
