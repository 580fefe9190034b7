// Package e2e drives the real binaries (providersim and two paymentsvc pods
// on one fresh database) through the seed notes' scenarios.
package e2e

import (
	"testing"
	"time"

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

// Seed scenario 1: the provider takes 800 ms, the client gives up at 500 ms
// and retries about a second later with the same key: the retry replays the
// first request's 201, and the provider holds exactly one charge.
func TestSeedScenario1TimeoutThenRetryReplays(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.sim.SetFaults(t, providersim.Faults{LatencyMS: 800})
	impatient := proctest.NewClient(s.podA.URL(), s.tenant.APIKey)
	impatient.HTTP.Timeout = 500 * time.Millisecond
	if r, err := impatient.Pay("seed-1", apiclient.Visa("o-1", 500)); err == nil {
		t.Fatalf("first attempt should time out on the client, got %s", r)
	}
	// The first request carries on without its client; wait for its charge.
	testkit.Eventually(t, 10*time.Second, "the slow charge lands", func() bool { return len(s.sim.Charges(t)) == 1 })
	var r apiclient.Response
	testkit.Eventually(t, 10*time.Second, "retry replays a 201", func() bool {
		r = s.a.MustPay(t, "seed-1", apiclient.Visa("o-1", 500))
		return r.Status != 409
	})
	if r.Status != 201 || !r.Replayed() || r.Str("status") != "SUCCEEDED" {
		t.Fatalf("retry: want 201 replayed SUCCEEDED, got %s replayed=%v", r, r.Replayed())
	}
	charges := s.sim.Charges(t)
	if len(charges) != 1 || charges[0].ID != r.Str("provider_charge_id") {
		t.Fatalf("want exactly one charge %s at the provider, got %+v", r.Str("provider_charge_id"), charges)
	}
}
