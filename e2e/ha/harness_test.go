//go:build ha

package ha

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/hatest"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/testkit"
)

// The pods' timings: short, so that a key whose owner failed with the
// database is taken over within seconds. Startup refuses a lock TTL that is
// not longer than the retry budget plus one call's timeout.
const (
	lockTTL     = 4 * time.Second
	callTimeout = "1s"
	retryBudget = "2s"

	streamName     = "PAYMENTS"
	streamReplicas = 3
)

// harness is the stack under test: the database formation, the JetStream
// cluster, the provider simulator, two paymentsvc pods and a tenant.
type harness struct {
	g      *hatest.Guard
	pg     *hatest.Postgres
	nats   *hatest.NATS
	js     jetstream.JetStream
	sim    *proctest.Sim
	pods   []*proctest.Process
	tenant proctest.Tenant
	dbURL  string
	pool   *pgxpool.Pool // the test's own view of the database, through failovers

	paid []payment // every payment answered 201 so far, across scenarios
}

func setup(t *testing.T) *harness {
	t.Helper()
	start := time.Now()
	g := hatest.StartGuard(t)
	proctest.Build(t)
	h := &harness{g: g, pg: hatest.StartPostgres(t, g)}
	h.nats = hatest.StartNATS(t, g, 3)
	_, h.js = h.nats.Connect()
	h.dbURL = h.pg.URL("payments")
	t.Logf("database %s, NATS %s, up in %s", h.dbURL, h.nats.URL(), time.Since(start).Round(time.Millisecond))

	// Webhooks go to pod A, so that they race the API's own completions
	// through the failovers too.
	addrA := testkit.ReservedAddr(t)
	h.sim = proctest.StartSim(t, proctest.SimOptions{Env: []string{"SIM_WEBHOOK_URL=http://" + addrA + "/v1/webhooks/sim"}})
	g.Watch(h.sim.Pid())
	env := []string{
		"OUTBOX_RELAY=on",
		"NATS_URL=" + h.nats.URL(),
		fmt.Sprintf("OUTBOX_STREAM_REPLICAS=%d", streamReplicas),
		"IDEMPOTENCY_LOCK_TTL=" + lockTTL.String(),
		"PROVIDER_CALL_TIMEOUT=" + callTimeout,
		"PROVIDER_RETRY_BUDGET=" + retryBudget,
		"PROVIDER_BREAKER_COOLDOWN=1s",
		"SHUTDOWN_TIMEOUT=5s",
	}
	for _, pod := range []struct{ name, addr string }{{"pod-a", addrA}, {"pod-b", "127.0.0.1:0"}} {
		p := proctest.StartPod(t, proctest.PodOptions{
			Name: pod.name, DatabaseURL: h.dbURL, ProviderURL: h.sim.URL(),
			Env: append(env[:len(env):len(env)], "HTTP_ADDR="+pod.addr),
		})
		g.Watch(p.Pid())
		h.pods = append(h.pods, p)
	}
	h.tenant = proctest.CreateTenant(t, h.dbURL, "shop")
	t.Cleanup(func() { h.saveLogs(t) }) // before the processes are killed

	pool, err := pgxpool.New(context.Background(), h.dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	h.pool = pool

	// The relays created the stream, replicated as asked.
	h.nats.WaitStreamHealthy(time.Minute, h.js, streamName, "")
	s, err := h.js.Stream(context.Background(), streamName)
	require.NoError(t, err)
	require.Equal(t, streamReplicas, s.CachedInfo().Config.Replicas, "replicas of the stream the relay created")
	t.Logf("stack up in %s", time.Since(start).Round(time.Millisecond))
	return h
}

// saveLogs writes the logs of the pods and the simulator to HATEST_LOGDIR,
// if set, for a look at what the service did during the faults.
func (h *harness) saveLogs(t *testing.T) {
	dir := os.Getenv("HATEST_LOGDIR")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("HATEST_LOGDIR: %v", err)
		return
	}
	for _, p := range append(h.pods, h.sim.Process) {
		if err := os.WriteFile(filepath.Join(dir, p.Name+".log"), []byte(p.Logs()), 0o644); err != nil {
			t.Logf("HATEST_LOGDIR: %v", err)
		}
	}
}

// reconciler runs the reconciler with args, with the pods' settings, and
// returns its stdout and exit status.
func (h *harness) reconciler(t *testing.T, args ...string) (string, int) {
	t.Helper()
	bin := proctest.Build(t).Reconciler // before the minute starts: a busy machine builds slowly
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, errOut, code, err := proctest.Run(ctx, bin, args, []string{
		"DATABASE_URL=" + h.dbURL, "PROVIDER_URL=" + h.sim.URL(),
		"IDEMPOTENCY_LOCK_TTL=" + lockTTL.String(), "PROVIDER_CALL_TIMEOUT=" + callTimeout, "PROVIDER_RETRY_BUDGET=" + retryBudget,
	})
	require.NoError(t, err)
	if code != 0 {
		t.Logf("reconciler %v exited %d:\n%s", args, code, errOut)
	}
	return out, code
}

// clients returns one API client per pod; a checkout's load balancer sends
// each try to the next pod.
func (h *harness) clients() []*proctest.Client {
	var cs []*proctest.Client
	for _, p := range h.pods {
		c := proctest.NewClient(p.URL(), h.tenant.APIKey)
		// A checkout gives up on a try well before the lock TTL and tries
		// again with the same key.
		c.HTTP.Timeout = 5 * time.Second
		cs = append(cs, c)
	}
	return cs
}
