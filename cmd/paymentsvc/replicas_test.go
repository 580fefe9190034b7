package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRefusesStreamReplicasOutOfRange(t *testing.T) {
	t.Parallel()
	for _, replicas := range []string{"0", "6", "-1"} {
		line, _ := refusedAtStartup(t, "OUTBOX_STREAM_REPLICAS="+replicas)
		require.Contains(t, line.Raw, "OUTBOX_STREAM_REPLICAS")
	}
	_, stderr, code := runCLI(t, []string{"OUTBOX_STREAM_REPLICAS=three"}, "serve")
	require.Equal(t, 2, code, "stderr: %s", stderr)
	require.Contains(t, stderr, "OUTBOX_STREAM_REPLICAS")

	stdout, stderr, code := runCLI(t, nil, "-h")
	require.Equal(t, 0, code)
	require.Contains(t, stdout+stderr, "--outbox-stream-replicas")
}
