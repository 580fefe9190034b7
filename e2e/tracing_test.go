package e2e

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it accepts POST /v1/traces
// (protobuf, gzipped or not) and keeps every span with its service name.
type otlpReceiver struct {
	URL   string
	mu    sync.Mutex
	spans []receivedSpan
}

type receivedSpan struct {
	service string
	span    *tracepb.Span
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rcv := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rcv.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			service := attrValue(rs.GetResource().GetAttributes(), "service.name")
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					rcv.spans = append(rcv.spans, receivedSpan{service: service, span: s})
				}
			}
		}
		rcv.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	rcv.URL = srv.URL
	return rcv
}

// trace returns the received spans of traceID (hex).
func (r *otlpReceiver) trace(traceID string) []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []receivedSpan
	for _, s := range r.spans {
		if hex.EncodeToString(s.span.GetTraceId()) == traceID {
			out = append(out, s)
		}
	}
	return out
}

func attrValue(attrs []*commonpb.KeyValue, key string) string {
	for _, kv := range attrs {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// headerRecorder is a reverse proxy in front of the simulator that records
// the traceparent header of every provider API request.
type headerRecorder struct {
	URL  string
	mu   sync.Mutex
	seen []string
}

func startHeaderRecorder(t *testing.T, target string) *headerRecorder {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	rec := &headerRecorder{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			rec.mu.Lock()
			rec.seen = append(rec.seen, r.Header.Get("traceparent"))
			rec.mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rec.URL = srv.URL
	return rec
}

func (h *headerRecorder) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}

// tracingStack is a pod whose provider calls go through a headerRecorder.
type tracingStack struct {
	db      *testdb.DB
	pod     *proctest.Process
	headers *headerRecorder
	client  *proctest.Client
	tenant  proctest.Tenant
}

func setupTracing(t *testing.T, podEnv ...string) *tracingStack {
	t.Helper()
	s := &tracingStack{db: testdb.New(t)}
	sim := proctest.StartSim(t, proctest.SimOptions{})
	s.headers = startHeaderRecorder(t, sim.URL())
	s.pod = proctest.StartPod(t, proctest.PodOptions{Name: "tracing-pod", DatabaseURL: s.db.URL, ProviderURL: s.headers.URL, Env: podEnv})
	s.tenant = proctest.CreateTenant(t, s.db.URL, "tracing-shop")
	s.client = proctest.NewClient(s.pod.URL(), s.tenant.APIKey)
	return s
}

func (s *tracingStack) outboxTraceparent(t *testing.T, paymentID string) *string {
	t.Helper()
	var tp *string
	require.NoError(t, s.db.Pool.QueryRow(t.Context(),
		`SELECT traceparent FROM outbox WHERE payment_id = $1 AND type = 'PaymentSucceeded'`, paymentID).Scan(&tp))
	return tp
}

// A real paymentsvc process with OTEL_EXPORTER_OTLP_ENDPOINT set exports
// the request's spans over OTLP/HTTP: the request span (continuing the
// caller's traceparent, with the payment id), its database statements and
// its provider call, under service.name paymentsvc; the provider got the
// trace's traceparent, the event's row keeps it, and the request's log line
// carries trace_id and span_id.
func TestTracingExportsRequestSpansOverOTLP(t *testing.T) {
	t.Parallel()
	rcv := startOTLPReceiver(t)
	s := setupTracing(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=100")

	const traceID = "0af7651916cd43dd8448eb211c80319c"
	r := opsOK(t)(s.client.Do(http.MethodPost, "/v1/payments",
		[]byte(`{"order_id":"o-otlp","amount":500,"currency":"USD","payment_method":"pm_card_visa"}`),
		map[string]string{
			"Idempotency-Key": "otlp-1", "Content-Type": "application/json", "X-Request-Id": "otlp-req-1",
			"traceparent": "00-" + traceID + "-b7ad6b7169203331-01",
		}))
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)
	paymentID := r.Str("id")

	var server *tracepb.Span
	var spans []receivedSpan
	testkit.Eventually(t, 30*time.Second, "the request's spans are exported", func() bool {
		spans = rcv.trace(traceID)
		server = nil
		provider, statements := false, false
		for _, s := range spans {
			switch {
			case s.span.GetKind() == tracepb.Span_SPAN_KIND_SERVER && s.span.GetName() == "POST /v1/payments":
				server = s.span
			case s.span.GetName() == "provider POST /v1/charges":
				provider = true
			case attrValue(s.span.GetAttributes(), "db.system.name") == "postgresql":
				statements = true
			}
		}
		return server != nil && provider && statements
	})
	require.Equal(t, "b7ad6b7169203331", hex.EncodeToString(server.GetParentSpanId()), "the caller's span is the parent")
	require.Equal(t, paymentID, attrValue(server.GetAttributes(), "payment.id"))
	require.Equal(t, s.tenant.ID, attrValue(server.GetAttributes(), "tenant.id"))
	for _, sp := range spans {
		require.Equal(t, "paymentsvc", sp.service, "service.name of %q", sp.span.GetName())
		for _, kv := range sp.span.GetAttributes() {
			v := kv.GetValue().GetStringValue()
			require.NotContains(t, v, s.tenant.APIKey, "%q %s", sp.span.GetName(), kv.GetKey())
			require.NotContains(t, v, "pm_card_visa", "%q %s", sp.span.GetName(), kv.GetKey())
		}
	}

	got := s.headers.all()
	require.Len(t, got, 1)
	require.True(t, strings.HasPrefix(got[0], "00-"+traceID+"-"), "the provider got the trace: %q", got[0])
	tp := s.outboxTraceparent(t, paymentID)
	require.NotNil(t, tp)
	require.True(t, strings.HasPrefix(*tp, "00-"+traceID+"-"), "the event keeps the trace: %q", *tp)

	line := onlyRequestLine(t, s.pod, "otlp-req-1")
	require.Equal(t, traceID, line.str("trace_id"), "%v", line)
	require.Equal(t, hex.EncodeToString(server.GetSpanId()), line.str("span_id"), "%v", line)
}

// Without OTEL_* the process traces nothing: the provider gets no
// traceparent (not even the caller's), the event keeps none, and the log
// lines have no trace ids.
func TestTracingOffProcessSendsNoTraceparent(t *testing.T) {
	t.Parallel()
	s := setupTracing(t)
	r := opsOK(t)(s.client.Do(http.MethodPost, "/v1/payments",
		[]byte(`{"order_id":"o-off","amount":500,"currency":"USD","payment_method":"pm_card_visa"}`),
		map[string]string{
			"Idempotency-Key": "off-1", "Content-Type": "application/json", "X-Request-Id": "off-req-1",
			"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		}))
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)
	require.Equal(t, []string{""}, s.headers.all(), "no traceparent to the provider")
	require.Nil(t, s.outboxTraceparent(t, r.Str("id")), "no traceparent on the event")
	line := onlyRequestLine(t, s.pod, "off-req-1")
	require.Empty(t, line.str("trace_id"), "%v", line)
	require.NotContains(t, s.pod.Logs(), "trace_id")
}

// A collector that is down slows nothing: requests answer as usual, and
// SIGTERM still exits 0 promptly (the flush is bounded).
func TestTracingCollectorDownSlowsNothing(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // connection refused from now on
	s := setupTracing(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+down.URL, "OTEL_BSP_SCHEDULE_DELAY=50")
	for i := range 5 {
		start := time.Now()
		r := s.client.MustPay(t, fmt.Sprintf("down-%d", i), apiclient.Visa(fmt.Sprintf("o-down-%d", i), 500))
		require.Equal(t, http.StatusCreated, r.Status, "%s", r)
		require.Less(t, time.Since(start), 5*time.Second, "request %d", i)
	}
	start := time.Now()
	require.NoError(t, s.pod.Signal(syscall.SIGTERM))
	code, err := s.pod.Wait(30 * time.Second)
	require.NoError(t, err)
	require.Equal(t, 0, code, "exit status")
	require.Less(t, time.Since(start), 15*time.Second, "shutdown with an unreachable collector")
}
