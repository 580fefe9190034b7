package proctest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/provider"
	simclient "github.com/acme/paymentsvc/internal/provider/sim"
	"github.com/acme/paymentsvc/internal/providersim"
)

// Sim is a provider simulator a test talks to: a process (StartSim) or a
// server in the test's own process (ServeSim). Its methods fail the test
// instead of returning errors.
type Sim struct {
	*Process                     // StartSim's process; nil for ServeSim
	Server   *providersim.Server // ServeSim's simulator; nil for StartSim
	url      string              // ServeSim's URL
}

// SimOptions configure a providersim process.
type SimOptions struct {
	Env []string // extra SIM_* settings, e.g. "SIM_LATENCY=800ms"
	// API is the wire format it speaks (SIM_API: ProviderTypeSim or
	// ProviderTypeStripe); empty: ProviderType(t), from E2E_PROVIDER_TYPE.
	// An Env that sets SIM_API wins.
	API string
}

// StartSim runs providersim as a process on a free port.
func StartSim(t testing.TB, opt SimOptions) *Sim {
	t.Helper()
	b := Build(t)
	api := opt.API
	if api == "" {
		api = ProviderType(t)
	}
	env := append([]string{"SIM_ADDR=127.0.0.1:0", "SIM_API=" + api}, opt.Env...)
	p := StartProcess(t, "providersim", b.ProviderSim, nil, env)
	return &Sim{Process: p}
}

// ServeSim runs a simulator with cfg in this process, behind an httptest
// server, until t ends. It speaks cfg.API (the simulator's own by
// default); E2E_PROVIDER_TYPE, meant for the process suites, is not read. wrap, if not nil, sits in front of the simulator's
// handler (to count or refuse some requests).
func ServeSim(t testing.TB, cfg providersim.Config, wrap func(http.Handler) http.Handler) *Sim {
	t.Helper()
	sim, err := providersim.New(cfg)
	if err != nil {
		t.Fatalf("providersim: %v", err)
	}
	h := sim.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		_ = sim.Close()
	})
	return &Sim{Server: sim, url: srv.URL}
}

// URL is the simulator's base URL.
func (s *Sim) URL() string {
	if s.Process != nil {
		return s.Process.URL()
	}
	return s.url
}

// Provider returns a resilient client of the simulator's provider API with
// cfg (FastProvider when cfg is zero), authenticated with apiKey.
func (s *Sim) Provider(apiKey string, cfg provider.Config) *provider.Resilient {
	if cfg == (provider.Config{}) {
		cfg = FastProvider
	}
	return provider.NewResilient(simclient.NewHTTPClient("sim", s.URL(), apiKey, &http.Client{}), cfg, nil)
}

// FastProvider are provider timings for tests: a call gives up after 300ms
// and retries stop after 500ms; five failures open the breaker for 10s.
var FastProvider = provider.Config{
	CallTimeout: 300 * time.Millisecond, RetryBudget: 500 * time.Millisecond,
	BreakerFailures: 5, BreakerCooldown: 10 * time.Second,
}

// SetFaults replaces the simulator's fault set.
func (s *Sim) SetFaults(t testing.TB, f providersim.Faults) {
	t.Helper()
	s.must(t, s.control().SetFaults(context.Background(), f))
}

// ClearFaults removes every fault.
func (s *Sim) ClearFaults(t testing.TB) {
	t.Helper()
	s.must(t, s.control().ClearFaults(context.Background()))
}

// Charges lists every charge the simulator holds.
func (s *Sim) Charges(t testing.TB) []providersim.Charge {
	t.Helper()
	ch, err := s.control().Charges(context.Background())
	s.must(t, err)
	return ch
}

// Expire makes the authorization of charge id expire now.
func (s *Sim) Expire(t testing.TB, id string) {
	t.Helper()
	s.must(t, s.control().Expire(context.Background(), id))
}

// Charge is the charge id as the simulator holds it.
func (s *Sim) Charge(t testing.TB, id string) providersim.Charge {
	t.Helper()
	for _, c := range s.Charges(t) {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("the simulator holds no charge %s", id)
	return providersim.Charge{}
}

// Stats returns the simulator's counters.
func (s *Sim) Stats(t testing.TB) providersim.Stats {
	t.Helper()
	st, err := s.control().Stats(context.Background())
	s.must(t, err)
	return st
}

// SucceededChargesFor counts the simulator's succeeded charges whose reference is paymentID.
func (s *Sim) SucceededChargesFor(t testing.TB, paymentID string) int {
	t.Helper()
	n := 0
	for _, c := range s.Charges(t) {
		if c.Reference == paymentID && c.Status == providersim.StatusSucceeded {
			n++
		}
	}
	return n
}

// control is the simulator's control API; its client's timeout bounds every call.
func (s *Sim) control() apiclient.Sim { return apiclient.Sim{URL: s.URL()} }

func (s *Sim) must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%v", err)
	}
}
