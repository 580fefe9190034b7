package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

func TestRefusesStreamReplicasOutOfRange(t *testing.T) {
	t.Parallel()
	for _, replicas := range []string{"0", "6", "-1"} {
		_, stderr, code := runCLI(t, []string{
			"DATABASE_URL=" + testdb.NewEmpty(t), "HTTP_ADDR=127.0.0.1:0", "PROVIDER_URL=" + testkit.RefusedURL(t, "http"),
			"OUTBOX_STREAM_REPLICAS=" + replicas,
		}, "serve")
		require.Equal(t, 1, code, "replicas %s, stderr: %s", replicas, stderr)
		lines := logLines(stderr)
		require.Len(t, lines, 1, "exactly one log line: %s", stderr)
		require.Contains(t, lines[0].Raw, "OUTBOX_STREAM_REPLICAS")
	}
	_, stderr, code := runCLI(t, []string{"OUTBOX_STREAM_REPLICAS=three"}, "serve")
	require.Equal(t, 2, code, "stderr: %s", stderr)
	require.Contains(t, stderr, "OUTBOX_STREAM_REPLICAS")

	stdout, stderr, code := runCLI(t, nil, "-h")
	require.Equal(t, 0, code)
	require.Contains(t, stdout+stderr, "--outbox-stream-replicas")
}
