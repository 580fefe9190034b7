package e2e

import (
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testkit"
)

// SIGTERM drains: a create in flight when the signal arrives (its provider
// call takes 800 ms) still gets its 201 and its one charge, readiness stops
// answering 200 as soon as the drain starts, and the process exits 0 within
// SHUTDOWN_TIMEOUT (a drain that overran it would exit 1).
func TestGracefulShutdownFinishesInFlightRequests(t *testing.T) {
	t.Parallel()
	const shutdownTimeout = 20 * time.Second
	s := setupOps(t, opsOptions{podEnv: []string{"SHUTDOWN_TIMEOUT=" + shutdownTimeout.String()}})
	s.sim.SetFaults(t, providersim.Faults{LatencyMS: 800})

	type answer struct {
		r   apiclient.Response
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := s.client.Pay("drain-1", apiclient.Visa("o-drain", 500))
		done <- answer{r, err}
	}()
	// The request is in flight once the provider has it.
	testkit.Eventually(t, 30*time.Second, "the charge call reaches the provider", func() bool {
		return s.sim.Stats(t).ChargeCalls >= 1
	})
	require.NoError(t, s.pod.Signal(syscall.SIGTERM))
	testkit.Eventually(t, 30*time.Second, "the pod starts draining", func() bool {
		return strings.Contains(s.pod.Logs(), `"msg":"shutting down: draining in-flight requests"`)
	})
	// From here readiness never says 200: it answers 503 "draining", or,
	// once the listener is closed (which Shutdown does at once), the
	// connection is refused or reset. Both are "not ready" and both are
	// checked; which one a run sees depends on timing, so the 503 answer
	// itself is pinned by internal/api's TestReadyzWhileDraining.
	if r, err := s.anon.Get("/readyz"); err != nil {
		require.True(t, errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF),
			"/readyz while draining: want 503 or a closed listener, got %v", err)
	} else {
		require.Equal(t, 503, r.Status, "/readyz while draining: %s", r)
		require.Equal(t, "draining", r.Str("status"))
	}

	var a answer
	select {
	case a = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the in-flight request got no answer")
	}
	require.NoError(t, a.err, "the in-flight request is answered")
	require.Equal(t, 201, a.r.Status, "%s", a.r)
	require.Equal(t, "SUCCEEDED", a.r.Str("status"))
	require.Equal(t, 1, s.sim.SucceededChargesFor(t, a.r.Str("id")))

	code, err := s.pod.Wait(shutdownTimeout + time.Minute)
	require.NoError(t, err, "the pod exits")
	require.Equal(t, 0, code, "exit status after a drain")
	require.Contains(t, s.pod.Logs(), `"msg":"stopped"`)
	// The request finished after the drain began, and was logged.
	l := onlyRequestLine(t, s.pod, a.r.Header.Get("X-Request-Id"))
	require.EqualValues(t, 201, l["status"])
}
