package soak

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// settings of a soak, from the environment (make soak sets them).
type settings struct {
	duration time.Duration // SOAK_DURATION, default 60s (make soak: 10m)
	rate     float64       // SOAK_RATE: operations per second, all workers together; default 20
	workers  int           // SOAK_WORKERS: concurrent clients; default 8
	every    time.Duration // SOAK_SAMPLE_EVERY: default duration/40, at least 1s
	report   string        // SOAK_REPORT: a file the figures are written to, if set
}

func readSettings(t *testing.T) settings {
	t.Helper()
	s := settings{duration: time.Minute, rate: 20, workers: 8}
	if v := os.Getenv("SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "SOAK_DURATION")
		s.duration = d
	}
	if v := os.Getenv("SOAK_RATE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		require.NoError(t, err, "SOAK_RATE")
		s.rate = r
	}
	if v := os.Getenv("SOAK_WORKERS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "SOAK_WORKERS")
		s.workers = n
	}
	s.every = max(time.Second, s.duration/40)
	if v := os.Getenv("SOAK_SAMPLE_EVERY"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "SOAK_SAMPLE_EVERY")
		s.every = d
	}
	s.report = os.Getenv("SOAK_REPORT")
	require.Positive(t, s.rate)
	require.Positive(t, s.workers)
	return s
}

// What may grow from the middle third of a pod's life to its last third
// (growing), per resource.
var limits = map[string]growth{
	"rss_mib":        {fraction: 0.25, slack: 16},
	"threads":        {fraction: 0.25, slack: 4},
	"goroutines":     {fraction: 0.25, slack: 20},
	"db_connections": {fraction: 0.25, slack: 4},
	"open_fds":       {fraction: 0.25, slack: 16},
	"heap_alloc_mib": {fraction: 0.5, slack: 16},
}

// resources are the sampled figures, in report order.
var resources = []string{"rss_mib", "threads", "goroutines", "db_connections", "open_fds", "heap_alloc_mib"}

// Mixed load through two real pods (creates, authorizations, replays, reads,
// refunds, captures, voids, the simulator's webhooks for each of them,
// provider faults, one pod killed and restarted halfway): every answer is
// one the API documents for that request, nothing is charged twice, no
// authorization is both captured and voided or captured past its amount, and
// each pod's RSS, threads,
// goroutines (go_goroutines), open file descriptors and database connections
// level off instead of growing with the requests served.
func TestSoak(t *testing.T) {
	cfg := readSettings(t)
	st := startStack(t)
	t.Logf("soak: %s at %.0f operations/s, %d workers, a sample every %s", cfg.duration, cfg.rate, cfg.workers, cfg.every)

	ctx, stop := context.WithTimeout(context.Background(), cfg.duration)
	defer stop()
	var wg sync.WaitGroup
	answers := newTally()
	l := &load{sim: st.sim}
	tokens := make(chan struct{})
	wg.Go(func() { pace(ctx, cfg.rate, tokens) })
	for w := range cfg.workers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for range tokens {
				pod := st.pods[rnd.IntN(len(st.pods))]
				op := pick(rnd)
				status, err := op.run(l, st.client(pod), rnd)
				answers.add(op, status, err, st.restarting.Load())
			}
		})
	}
	wg.Go(func() { st.restartHalfway(ctx, t, cfg.duration) })
	series := st.sample(ctx, t, cfg.every)
	wg.Wait()
	_ = st.sim.set(providersim.Faults{})

	answers.check(t)
	st.requireChargedOnce(t)
	report := judge(t, series)
	t.Log("\n" + report)
	if cfg.report != "" {
		require.NoError(t, os.WriteFile(cfg.report, []byte(fmt.Sprintf("soak %s at %.0f ops/s, %d workers\n%s\n%s",
			cfg.duration, cfg.rate, cfg.workers, answers.summary(), report)), 0o644))
	}
}

// pace sends a token rate times a second until ctx ends, then closes tokens.
func pace(ctx context.Context, rate float64, tokens chan<- struct{}) {
	defer close(tokens)
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			select {
			case tokens <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// stack is what the soak runs on: one database, one simulator delivering
// its webhooks to the first pod, a private NATS for the relays, two pods.
type stack struct {
	db         *testdb.DB
	sim        *simControl
	simProc    *proctest.Sim
	pods       []*proctest.Process
	apiKey     string
	restarting atomic.Bool // a pod is down for its restart
}

// simControl is the simulator's control API for the load's goroutines.
type simControl struct{ api apiclient.Sim }

func (s *simControl) set(f providersim.Faults) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if f == (providersim.Faults{}) {
		return s.api.ClearFaults(ctx)
	}
	return s.api.SetFaults(ctx, f)
}

func startStack(t *testing.T) *stack {
	t.Helper()
	d := testdb.New(t)
	nats := testkit.StartNATSServer(t)
	addrs := []string{testkit.ReservedAddr(t), testkit.ReservedAddr(t)}
	secret := testkit.RandomID("whsec_")
	sim := proctest.StartSim(t, proctest.SimOptions{Env: []string{
		"SIM_WEBHOOK_SECRET=" + secret, "SIM_WEBHOOK_URL=http://" + addrs[0] + "/v1/webhooks/sim",
	}})
	st := &stack{db: d, simProc: sim, sim: &simControl{api: apiclient.Sim{URL: sim.URL()}}}
	for i, addr := range addrs {
		st.pods = append(st.pods, proctest.StartPod(t, proctest.PodOptions{
			Name: fmt.Sprintf("soak-pod-%d", i), DatabaseURL: d.URL, ProviderURL: sim.URL(),
			Env: []string{"HTTP_ADDR=" + addr, "WEBHOOK_SECRETS=" + secret, "OUTBOX_RELAY=on", "NATS_URL=" + nats.URL,
				// Short enough that UNKNOWN payments resume under replays
				// within the run; long enough for the provider's budget.
				"IDEMPOTENCY_LOCK_TTL=12s", "PROVIDER_CALL_TIMEOUT=2s", "PROVIDER_RETRY_BUDGET=2s",
				// A breaker a fault opened closes again within the run.
				"PROVIDER_BREAKER_COOLDOWN=2s"},
		}))
	}
	st.apiKey = proctest.CreateTenant(t, d.URL, "soak-shop").APIKey
	return st
}

// client is a client of pod as the soak's tenant (its address read now: a
// restarted pod keeps its reserved address).
func (s *stack) client(pod *proctest.Process) *apiclient.Client {
	return apiclient.New(pod.URL(), s.apiKey)
}

// restartHalfway kills the second pod halfway through and starts it again.
func (s *stack) restartHalfway(ctx context.Context, t *testing.T, d time.Duration) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(d / 2):
	}
	pod := s.pods[1]
	s.restarting.Store(true)
	defer s.restarting.Store(false)
	if err := pod.Proc.Restart(context.Background()); err != nil {
		t.Errorf("restart %s: %v", pod.Name, err)
	}
}

// sample is one reading of a pod's resources.
type sample map[string]float64

// lifeKey names one life of a pod: a restarted pod is a new process, whose
// figures start over.
type lifeKey struct {
	pod string
	pid int
}

// sample reads every pod's resources every period until ctx ends.
func (s *stack) sample(ctx context.Context, t *testing.T, every time.Duration) map[lifeKey][]sample {
	out := map[lifeKey][]sample{}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
		for _, pod := range s.pods {
			pid := pod.Pid()
			sm, err := readSample(pod, pid)
			if err != nil {
				if !s.restarting.Load() {
					t.Logf("sample of %s (pid %d): %v", pod.Name, pid, err)
				}
				continue
			}
			k := lifeKey{pod.Name, pid}
			out[k] = append(out[k], sm)
		}
	}
}

// readSample reads a pod's RSS and threads (/proc), and its goroutines,
// database connections, open descriptors and heap (/metrics).
func readSample(pod *proctest.Process, pid int) (sample, error) {
	sm := sample{}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(value)
		switch {
		case name == "VmRSS" && len(fields) == 2: // kB
			kb, _ := strconv.ParseFloat(fields[0], 64)
			sm["rss_mib"] = kb / 1024
		case name == "Threads" && len(fields) == 1:
			sm["threads"], _ = strconv.ParseFloat(fields[0], 64)
		}
	}
	m, err := scrape(pod.URL())
	if err != nil {
		return nil, err
	}
	sm["goroutines"] = gauge(m, "go_goroutines", nil)
	sm["open_fds"] = gauge(m, "process_open_fds", nil)
	sm["heap_alloc_mib"] = gauge(m, "go_memstats_heap_alloc_bytes", nil) / (1 << 20)
	sm["db_connections"] = gauge(m, "paymentsvc_database_connections", map[string]string{"state": "total"})
	return sm, nil
}

// scrape reads a pod's /metrics.
func scrape(base string) (map[string]*dto.MetricFamily, error) {
	r, err := apiclient.New(base, "").Get("/metrics")
	if err != nil {
		return nil, err
	}
	if r.Status != 200 {
		return nil, fmt.Errorf("/metrics: %s", r)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	return p.TextToMetricFamilies(bytes.NewReader(r.Raw))
}

// gauge is the value of family name's sample with labels (0 if none).
func gauge(m map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	fam, ok := m[name]
	if !ok {
		return 0
	}
	for _, metric := range fam.GetMetric() {
		match := 0
		for _, lp := range metric.GetLabel() {
			if v, ok := labels[lp.GetName()]; ok && v == lp.GetValue() {
				match++
			}
		}
		if match == len(labels) && metric.Gauge != nil {
			return metric.Gauge.GetValue()
		}
	}
	return 0
}

// judge fails t for every resource of a pod's life that kept growing, and
// returns the figures as a table.
func judge(t *testing.T, series map[lifeKey][]sample) string {
	t.Helper()
	keys := make([]lifeKey, 0, len(series))
	for k := range series {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].pod < keys[j].pod || keys[i].pod == keys[j].pod && keys[i].pid < keys[j].pid
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%-24s %-15s %9s %9s %9s  verdict\n", "pod (pid)", "resource", "first", "middle", "last")
	judged := 0
	for _, k := range keys {
		samples := series[k]
		for _, res := range resources {
			xs := make([]float64, len(samples))
			for i, sm := range samples {
				xs[i] = sm[res]
			}
			grows, why := growing(xs, limits[res])
			verdict := "levels off"
			switch {
			case len(xs) < minTrendSamples:
				verdict = "too few samples"
			case grows:
				verdict = "GROWS"
				t.Errorf("%s (pid %d): %s keeps growing: %s", k.pod, k.pid, res, why)
			}
			if len(xs) >= minTrendSamples {
				judged++
				th := thirdsOf(xs)
				fmt.Fprintf(&b, "%-24s %-15s %9.1f %9.1f %9.1f  %s\n", fmt.Sprintf("%s (%d)", k.pod, k.pid), res, th.first, th.middle, th.last, verdict)
			} else {
				fmt.Fprintf(&b, "%-24s %-15s %29s  %s\n", fmt.Sprintf("%s (%d)", k.pod, k.pid), res, "", verdict)
			}
		}
	}
	require.Positive(t, judged, "no pod was sampled long enough to judge: make the soak longer or SOAK_SAMPLE_EVERY shorter")
	return b.String()
}

// requireChargedOnce checks the simulator: no payment has two succeeded
// charges.
func (s *stack) requireChargedOnce(t *testing.T) {
	t.Helper()
	per := map[string]int{}
	for _, c := range s.simProc.Charges(t) {
		if c.Status == providersim.StatusSucceeded {
			per[c.Reference]++
		}
		require.False(t, c.CaptureKey != nil && c.VoidKey != nil, "charge %s of %s both captured and voided", c.ID, c.Reference)
		require.LessOrEqual(t, c.AmountCaptured, c.Amount, "charge %s of %s captured more than authorized", c.ID, c.Reference)
	}
	for ref, n := range per {
		require.Equal(t, 1, n, "payment %s charged %d times", ref, n)
	}
	t.Logf("soak: %d payments charged, each once", len(per))
}

// Pseudo-statuses of the tally: a transport error while a pod was down for
// its restart, and an operation with nothing to work on yet.
const (
	podDown = -1
	skipped = -2
)

// tally counts the answers of each operation.
type tally struct {
	mu     sync.Mutex
	counts map[string]map[int]int
	bad    []string
}

func newTally() *tally { return &tally{counts: map[string]map[int]int{}} }

func (tl *tally) add(op *operation, status int, err error, restarting bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.counts[op.name] == nil {
		tl.counts[op.name] = map[int]int{}
	}
	switch {
	case errors.Is(err, errNothingYet):
		tl.counts[op.name][skipped]++
	case err != nil && restarting:
		tl.counts[op.name][podDown]++
	case err != nil:
		tl.bad = append(tl.bad, fmt.Sprintf("%s: %v", op.name, err))
	default:
		tl.counts[op.name][status]++
		ok := false
		for _, s := range op.ok {
			ok = ok || s == status
		}
		if !ok {
			tl.bad = append(tl.bad, fmt.Sprintf("%s answered %d", op.name, status))
		}
	}
}

// check fails t on an answer the operation may not give (a 500, say), or a
// transport error outside the restart.
func (tl *tally) check(t *testing.T) {
	t.Helper()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	total := 0
	for _, byStatus := range tl.counts {
		for _, n := range byStatus {
			total += n
		}
	}
	require.Positive(t, total, "no operation ran")
	if len(tl.bad) > 0 {
		t.Errorf("%d unexpected answers, first ones: %q", len(tl.bad), tl.bad[:min(10, len(tl.bad))])
	}
	t.Log(tl.summaryLocked())
}

func (tl *tally) summary() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.summaryLocked()
}

func (tl *tally) summaryLocked() string {
	var b strings.Builder
	names := make([]string, 0, len(tl.counts))
	for name := range tl.counts {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(&b, "%-15s", name)
		statuses := make([]int, 0, len(tl.counts[name]))
		for s := range tl.counts[name] {
			statuses = append(statuses, s)
		}
		sort.Ints(statuses)
		for _, s := range statuses {
			label := strconv.Itoa(s)
			switch s {
			case podDown:
				label = "pod down"
			case skipped:
				label = "skipped"
			}
			fmt.Fprintf(&b, " %s×%d", label, tl.counts[name][s])
		}
		b.WriteString("\n")
	}
	return b.String()
}
