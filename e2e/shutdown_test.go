package e2e

import (
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testkit"
)

// Log messages of a pod's shutdown, in order.
const (
	msgNotReady = "shutting down: not ready, still serving"
	msgDraining = "shutting down: draining in-flight requests"
	msgCut      = "shutdown timeout: cutting off the requests still in flight"
	msgStopped  = "stopped"
)

// logLine returns the pod's first log line with msg, waiting for it.
func logLine(t *testing.T, p *proctest.Process, msg string) opsLogLine {
	t.Helper()
	var found opsLogLine
	testkit.Eventually(t, time.Minute, "the pod logs "+msg, func() bool {
		for _, l := range opsLogLines(p) {
			if l.str("msg") == msg {
				found = l
				return true
			}
		}
		return false
	})
	return found
}

// logTime is the time a log line was written.
func logTime(t *testing.T, l opsLogLine) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, l.str("time"))
	require.NoError(t, err, "%v", l)
	return ts
}

// answer is a response or the transport error of a request made in a goroutine.
type answer struct {
	r   apiclient.Response
	err error
}

// payAsync sends a create in a goroutine; the channel gets its answer.
func payAsync(c *proctest.Client, key string, body apiclient.Payment) <-chan answer {
	done := make(chan answer, 1)
	go func() {
		r, err := c.Pay(key, body)
		done <- answer{r, err}
	}()
	return done
}

func waitAnswer(t *testing.T, done <-chan answer) answer {
	t.Helper()
	select {
	case a := <-done:
		return a
	case <-time.After(2 * time.Minute):
		t.Fatal("the request got no answer")
	}
	return answer{}
}

// SIGTERM drains: readiness answers 503 from the start, the drain delay
// passes, then a create still in flight (its provider call takes 5s, longer
// than the delay) gets its 201 and its one charge, and the process exits 0.
func TestGracefulShutdownFinishesInFlightRequests(t *testing.T) {
	t.Parallel()
	const shutdownTimeout, drainDelay = 20 * time.Second, 2 * time.Second
	s := setupOps(t, opsOptions{podEnv: []string{
		"SHUTDOWN_TIMEOUT=" + shutdownTimeout.String(), "SHUTDOWN_DRAIN_DELAY=" + drainDelay.String(),
		"PROVIDER_CALL_TIMEOUT=10s", "PROVIDER_RETRY_BUDGET=1s", "IDEMPOTENCY_LOCK_TTL=15s",
	}})
	s.sim.SetFaults(t, providersim.Faults{LatencyMS: 5000})

	done := payAsync(s.client, "drain-1", apiclient.Visa("o-drain", 500))
	// The request is in flight once the provider has it.
	testkit.Eventually(t, 30*time.Second, "the charge call reaches the provider", func() bool {
		return s.sim.Stats(t).ChargeCalls >= 1
	})
	require.NoError(t, s.pod.Signal(syscall.SIGTERM))
	logLine(t, s.pod, msgNotReady)
	// The listener still serves during the drain delay: readiness answers,
	// and says 503.
	r := opsOK(t)(s.anon.Get("/readyz"))
	require.Equal(t, http.StatusServiceUnavailable, r.Status, "/readyz while draining: %s", r)
	require.Equal(t, "draining", r.Str("status"))

	a := waitAnswer(t, done)
	require.NoError(t, a.err, "the in-flight request is answered")
	require.Equal(t, http.StatusCreated, a.r.Status, "%s", a.r)
	require.Equal(t, "SUCCEEDED", a.r.Str("status"))
	require.Equal(t, 1, s.sim.SucceededChargesFor(t, a.r.Str("id")))

	code, err := s.pod.Wait(shutdownTimeout + time.Minute)
	require.NoError(t, err, "the pod exits")
	require.Equal(t, 0, code, "exit status after a drain")
	logLine(t, s.pod, msgStopped)
	// The request finished after the drain (not the delay) began, and was logged.
	l := onlyRequestLine(t, s.pod, a.r.Header.Get("X-Request-Id"))
	require.EqualValues(t, 201, l["status"])
	require.True(t, logTime(t, l).After(logTime(t, logLine(t, s.pod, msgDraining))), "answered during the drain")
}

// During SHUTDOWN_DRAIN_DELAY the pod is not ready (503) but still serves
// new requests, so that a load balancer that learns from the readiness probe
// takes it out before connections are refused; then it drains and exits 0.
func TestDrainDelayServesWhileNotReady(t *testing.T) {
	t.Parallel()
	const drainDelay = 4 * time.Second
	s := setupOps(t, opsOptions{podEnv: []string{"SHUTDOWN_DRAIN_DELAY=" + drainDelay.String()}})
	require.Equal(t, http.StatusOK, opsOK(t)(s.anon.Get("/readyz")).Status)

	require.NoError(t, s.pod.Signal(syscall.SIGTERM))
	notReady := logLine(t, s.pod, msgNotReady)
	r := opsOK(t)(s.anon.Get("/readyz"))
	require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r)
	require.Equal(t, "draining", r.Str("status"))
	paid := s.client.MustPay(t, "delay-1", apiclient.Visa("o-delay", 500))
	require.Equal(t, http.StatusCreated, paid.Status, "a new request is served during the drain delay: %s", paid)
	require.Equal(t, http.StatusOK, opsOK(t)(s.client.Get("/v1/payments/"+paid.Str("id"))).Status)

	code, err := s.pod.Wait(time.Minute)
	require.NoError(t, err)
	require.Equal(t, 0, code)
	draining := logLine(t, s.pod, msgDraining)
	require.GreaterOrEqual(t, logTime(t, draining).Sub(logTime(t, notReady)), drainDelay, "the listener closed only after the delay")
	logLine(t, s.pod, msgStopped)
}

// A request still in flight when SHUTDOWN_TIMEOUT runs out is cut off: the
// process logs what it cut and still exits 0 (it finished what it could).
func TestShutdownTimeoutCutsInFlightRequestsAndExitsZero(t *testing.T) {
	t.Parallel()
	s := setupOps(t, opsOptions{podEnv: []string{
		"SHUTDOWN_TIMEOUT=1s", "SHUTDOWN_DRAIN_DELAY=0s",
		"PROVIDER_CALL_TIMEOUT=30s", "PROVIDER_RETRY_BUDGET=1s", "IDEMPOTENCY_LOCK_TTL=40s",
	}})
	s.sim.SetFaults(t, providersim.Faults{LatencyMS: 20000})

	done := payAsync(s.client, "cut-1", apiclient.Visa("o-cut", 500))
	testkit.Eventually(t, 30*time.Second, "the charge call reaches the provider", func() bool {
		return s.sim.Stats(t).ChargeCalls >= 1
	})
	require.NoError(t, s.pod.Signal(syscall.SIGTERM))
	code, err := s.pod.Wait(time.Minute)
	require.NoError(t, err, "the pod exits after SHUTDOWN_TIMEOUT")
	require.Equal(t, 0, code, "exit 0 after cutting off what did not finish: %s", s.pod.Logs())
	cut := logLine(t, s.pod, msgCut)
	require.Equal(t, "WARN", cut.str("level"))
	require.EqualValues(t, 1, cut["active_connections"], "%v", cut)
	logLine(t, s.pod, msgStopped)
	require.Error(t, waitAnswer(t, done).err, "the cut request got no answer")
}
