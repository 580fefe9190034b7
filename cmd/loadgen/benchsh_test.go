package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// scripts/bench.sh's figures, parsed from the outputs of a real run kept in
// testdata/bench (a 3 s run on a busy machine): the four figures of make
// bench are printed as computed by hand from those files.
func TestBenchScriptReport(t *testing.T) {
	cmd := exec.Command("../../scripts/bench.sh")
	cmd.Env = append(os.Environ(), "BENCH_PARSE_ONLY="+mustAbs(t, "testdata/bench"), "BENCH_CLIENTS=16")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	s := string(out)
	for _, want := range []string{
		// 96.1 created/s ÷ 442.56 tps
		"create throughput ratio: 0.22× (goal ≥ 1.0)",
		// 3088.1 replays/s ÷ 8819.11 tps
		"replay throughput ratio: 0.35× (goal ≥ 0.6)",
		"create p99 at 16 clients: 953.4 ms (goal ≤ 25)",
		// 2.520 s ÷ 294 payments against 3.030 s ÷ 1289 transactions
		"database cost ratio (postgres CPU per created payment ÷ per reference create): 8571.4 µs ÷ 2350.7 µs = 3.65× (goal ≤ 1.0)",
		// 2157216 B ÷ 294 against 4477272 B ÷ 1289
		"WAL per created payment ÷ per reference create: 7337.5 B ÷ 3473.4 B = 2.11×",
	} {
		require.Contains(t, s, want+"\n", "in:\n%s", s)
	}
	require.Equal(t, 1, strings.Count(s, "\nreplay  | postgres CPU   142.9 µs/tx"), "the replay's cost line, in:\n%s", s)
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	wd, err := os.Getwd()
	require.NoError(t, err)
	return wd + "/" + p
}
