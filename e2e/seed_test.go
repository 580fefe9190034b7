// Package e2e drives the real binaries (providersim and two paymentsvc pods
// on one fresh database) through the failure scenarios of
// docs/failure-scenarios.md (the "seed scenarios" of the test names) and more.
package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

type stack struct {
	sim    *proctest.Sim
	podA   *proctest.Process
	podB   *proctest.Process
	tenant proctest.Tenant
	a, b   *proctest.Client
	dbURL  string
}

func setup(t *testing.T, podEnv ...string) *stack {
	t.Helper()
	d := testdb.New(t)
	sim := proctest.StartSim(t, proctest.SimOptions{})
	opt := proctest.PodOptions{DatabaseURL: d.URL, ProviderURL: sim.URL(), Env: podEnv}
	opt.Name = "pod-a"
	a := proctest.StartPod(t, opt)
	opt.Name = "pod-b"
	b := proctest.StartPod(t, opt)
	tn := proctest.CreateTenant(t, d.URL, "shop")
	return &stack{sim: sim, podA: a, podB: b, tenant: tn, dbURL: d.URL,
		a: proctest.NewClient(a.URL(), tn.APIKey), b: proctest.NewClient(b.URL(), tn.APIKey)}
}

// Scenario 1 of docs/failure-scenarios.md: the provider takes 800 ms, the client gives up at 500 ms
// and retries about a second later with the same key: the retry replays the
// first request's 201, and the provider holds exactly one charge.
func TestSeedScenario1TimeoutThenRetryReplays(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.sim.SetFaults(t, providersim.Faults{LatencyMS: 800})
	impatient := proctest.NewClient(s.podA.URL(), s.tenant.APIKey)
	impatient.HTTP.Timeout = 500 * time.Millisecond
	first, err := impatient.Pay("seed-1", apiclient.Visa("o-1", 500))
	require.Error(t, err, "the first attempt times out on the client, yet got %s", first)
	// The first request carries on without its client; wait for its charge.
	testkit.Eventually(t, 10*time.Second, "the slow charge lands", func() bool { return len(s.sim.Charges(t)) == 1 })
	var r apiclient.Response
	testkit.Eventually(t, 10*time.Second, "retry replays a 201", func() bool {
		r = s.a.MustPay(t, "seed-1", apiclient.Visa("o-1", 500))
		return r.Status != 409
	})
	require.Equal(t, 201, r.Status, "retry: %s", r)
	require.True(t, r.Replayed(), "the retry replays the first request's answer")
	require.Equal(t, "SUCCEEDED", r.Str("status"))
	charges := s.sim.Charges(t)
	require.Len(t, charges, 1, "charges at the provider")
	require.Equal(t, r.Str("provider_charge_id"), charges[0].ID)
}
