package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
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

// opsStack is one paymentsvc pod with its own simulator, database and
// tenant: the operations tests read per-process metrics and logs, so they do
// not share a pod with anything else.
type opsStack struct {
	db     *testdb.DB
	sim    *proctest.Sim
	pod    *proctest.Process
	tenant proctest.Tenant
	client *proctest.Client // the tenant's client
	anon   *proctest.Client // no API key, for webhooks and operations endpoints
	secret string           // the webhook signing secret shared by sim and pod
}

// opsOptions configure setupOps.
type opsOptions struct {
	podEnv []string
	simEnv []string
	// webhooks makes the simulator deliver its webhooks to the pod, through
	// a proxy in the test that forwards with hookTransport (nil: default).
	webhooks      bool
	hookTransport http.RoundTripper
	// secret is the webhook secret (default: a fresh one).
	secret string
	// transport, if set, carries the clients' requests (e.g. a specValidator).
	transport func(next http.RoundTripper) http.RoundTripper
	// podDatabaseURL, if set, rewrites the database URL the pod is given.
	podDatabaseURL func(string) string
	// podProviderURL, if set, rewrites the simulator's URL the pod is given.
	podProviderURL func(string) string
}

func setupOps(t *testing.T, opt opsOptions) *opsStack {
	t.Helper()
	s := &opsStack{db: testdb.New(t), secret: opt.secret}
	if s.secret == "" {
		s.secret = testkit.RandomID("whsec_")
	}
	simEnv := append([]string{"SIM_WEBHOOK_SECRET=" + s.secret}, opt.simEnv...)
	var hookTarget atomic.Pointer[url.URL]
	if opt.webhooks {
		// The simulator needs the pod's address and the pod the
		// simulator's: the proxy is started first and pointed at the pod
		// once it listens; deliveries before that get a 503 and are retried.
		proxy := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				if u := hookTarget.Load(); u != nil {
					pr.SetURL(u)
				}
			},
			Transport: opt.hookTransport,
		}
		hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hookTarget.Load() == nil {
				http.Error(w, "pod not started yet", http.StatusServiceUnavailable)
				return
			}
			proxy.ServeHTTP(w, r)
		}))
		t.Cleanup(hooks.Close)
		simEnv = append(simEnv, "SIM_WEBHOOK_URL="+hooks.URL+"/v1/webhooks/sim")
	}
	s.sim = proctest.StartSim(t, proctest.SimOptions{Env: simEnv})
	podEnv := append([]string{"WEBHOOK_SECRETS=" + s.secret}, opt.podEnv...)
	dbURL := s.db.URL
	if opt.podDatabaseURL != nil {
		dbURL = opt.podDatabaseURL(dbURL)
	}
	provURL := s.sim.URL()
	if opt.podProviderURL != nil {
		provURL = opt.podProviderURL(provURL)
	}
	s.pod = proctest.StartPod(t, proctest.PodOptions{Name: "ops-pod", DatabaseURL: dbURL, ProviderURL: provURL, Env: podEnv})
	u, err := url.Parse(s.pod.URL())
	require.NoError(t, err)
	hookTarget.Store(u)
	s.tenant = proctest.CreateTenant(t, s.db.URL, "ops-shop")
	s.client = proctest.NewClient(s.pod.URL(), s.tenant.APIKey)
	s.anon = proctest.NewClient(s.pod.URL(), "")
	// As proctest's, plus Expect: 100-continue support: a request sent with
	// that header and a body the server refuses unread (413) gets its answer
	// instead of a broken pipe while the body is still being written.
	var rt http.RoundTripper = &http.Transport{DisableKeepAlives: true, ExpectContinueTimeout: 30 * time.Second}
	if opt.transport != nil {
		rt = opt.transport(rt)
	}
	s.client.HTTP.Transport, s.anon.HTTP.Transport = rt, rt
	return s
}

// expectContinue is the header of a request whose body the server may
// refuse without reading it (see setupOps).
var expectContinue = map[string]string{"Expect": "100-continue"}

// opsEvent is a provider event about charge.
func opsEvent(id, typ string, charge providersim.Charge) []byte {
	b, err := json.Marshal(providersim.Event{ID: id, Type: typ, Created: time.Now().Unix(), Data: providersim.EventData{Charge: charge}})
	if err != nil {
		panic(err)
	}
	return b
}

// postWebhook posts body to the pod's webhook endpoint, signed with secret
// at the current time ("" sends no signature), with extra headers.
func (s *opsStack) postWebhook(t *testing.T, secret string, body []byte, extra map[string]string) apiclient.Response {
	t.Helper()
	h := map[string]string{"Content-Type": "application/json"}
	if secret != "" {
		h["Sim-Signature"] = providersim.SignatureHeader(secret, time.Now().Unix(), body)
	}
	for k, v := range extra {
		h[k] = v
	}
	return s.anon.MustDo(t, http.MethodPost, "/v1/webhooks/sim", body, h)
}

// opsMetrics is one scrape of /metrics.
type opsMetrics map[string]*dto.MetricFamily

// scrape fetches and parses the pod's /metrics.
func (s *opsStack) scrape(t *testing.T) opsMetrics {
	t.Helper()
	return scrapeMetrics(t, s.anon)
}

// scrapeMetrics fetches and parses /metrics of the pod c talks to.
func scrapeMetrics(t *testing.T, c *proctest.Client) opsMetrics {
	t.Helper()
	r := c.MustGet(t, "/metrics")
	require.Equal(t, http.StatusOK, r.Status, "GET /metrics")
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(r.Raw))
	require.NoError(t, err, "parse /metrics")
	return opsMetrics(fams)
}

// find returns the sample of family name whose labels include labels, or nil.
func (m opsMetrics) find(name string, labels map[string]string) *dto.Metric {
	fam, ok := m[name]
	if !ok {
		return nil
	}
	for _, metric := range fam.GetMetric() {
		match := 0
		for _, lp := range metric.GetLabel() {
			if v, ok := labels[lp.GetName()]; ok && v == lp.GetValue() {
				match++
			}
		}
		if match == len(labels) {
			return metric
		}
	}
	return nil
}

// value is the value of a counter or gauge sample, or of a histogram's
// count (0 when the sample does not exist yet: a counter never incremented).
func (m opsMetrics) value(name string, labels map[string]string) float64 {
	metric := m.find(name, labels)
	switch {
	case metric == nil:
		return 0
	case metric.Counter != nil:
		return metric.Counter.GetValue()
	case metric.Gauge != nil:
		return metric.Gauge.GetValue()
	case metric.Histogram != nil:
		return float64(metric.Histogram.GetSampleCount())
	}
	return 0
}

// opsLabels is a shorthand for label sets: opsLabels("route", "/x", "code", "200").
func opsLabels(kv ...string) map[string]string {
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// opsLogLine is one JSON log line of a process.
type opsLogLine map[string]any

func (l opsLogLine) str(k string) string {
	s, _ := l[k].(string)
	return s
}

// opsLogLines parses a process's JSON log lines (others are skipped).
func opsLogLines(p *proctest.Process) []opsLogLine {
	var out []opsLogLine
	dec := json.NewDecoder(strings.NewReader(p.Logs()))
	for dec.More() {
		var l opsLogLine
		if err := dec.Decode(&l); err != nil {
			break
		}
		out = append(out, l)
	}
	return out
}

// opsRequestLines returns the "request" log lines whose request_id is id.
func opsRequestLines(p *proctest.Process, id string) []opsLogLine {
	var out []opsLogLine
	for _, l := range opsLogLines(p) {
		if l.str("msg") == "request" && l.str("request_id") == id {
			out = append(out, l)
		}
	}
	return out
}

// opsOK fails t on a transport error and returns the answer.
func opsOK(t *testing.T) func(apiclient.Response, error) apiclient.Response {
	return func(r apiclient.Response, err error) apiclient.Response {
		t.Helper()
		require.NoError(t, err)
		return r
	}
}

// opsProblem checks a problem+json answer's status and code.
func opsProblem(t *testing.T, r apiclient.Response, status int, code string) {
	t.Helper()
	require.NoError(t, r.CheckProblem(status, code))
}

// retryAfterSeconds is the answer's Retry-After in whole seconds (0 if none).
func retryAfterSeconds(r apiclient.Response) int { return r.RetryAfter() }
