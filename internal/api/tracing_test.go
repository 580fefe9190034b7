package api_test

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/tracing"
)

// The tracing tests are not parallel: tracing is process-wide (the global
// tracer provider), so each turns it on around its own run, and the
// parallel tests of the package, which run after every sequential one, see
// it off.

// traceparents records the traceparent header of every request the
// simulator gets.
type traceparents struct {
	mu   sync.Mutex
	seen []string
}

func (tp *traceparents) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			tp.mu.Lock()
			tp.seen = append(tp.seen, r.Header.Get("traceparent"))
			tp.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (tp *traceparents) all() []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]string(nil), tp.seen...)
}

// withTracing turns tracing on for t with an in-memory recorder.
func withTracing(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	require.False(t, tracing.Enabled(), "tracing left on by another test")
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(tracing.Install(tp))
	return rec
}

// spansOf waits until the trace's server span has ended and returns the
// trace's spans by span id, and the server span.
func spansOf(t *testing.T, rec *tracetest.SpanRecorder, traceID trace.TraceID, name string) (map[trace.SpanID]sdktrace.ReadOnlySpan, sdktrace.ReadOnlySpan) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
		var server sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.SpanContext().TraceID() != traceID {
				continue
			}
			byID[s.SpanContext().SpanID()] = s
			if s.SpanKind() == trace.SpanKindServer && s.Name() == name {
				server = s
			}
		}
		if server != nil {
			return byID, server
		}
		require.True(t, time.Now().Before(deadline), "no server span %q in trace %s", name, traceID)
		time.Sleep(10 * time.Millisecond)
	}
}

// descendsFrom reports whether s is root or below it.
func descendsFrom(byID map[trace.SpanID]sdktrace.ReadOnlySpan, s, root sdktrace.ReadOnlySpan) bool {
	for s != nil {
		if s.SpanContext().SpanID() == root.SpanContext().SpanID() {
			return true
		}
		s = byID[s.Parent().SpanID()]
	}
	return false
}

func attrOf(s sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

// A traced create continues the caller's traceparent: the request span is
// the remote parent's child, named by its route, with the tenant and
// payment ids and nothing secret; the database transactions and statements
// and the provider call are below it; the provider got the traceparent of
// its call's span; and the PaymentSucceeded outbox row keeps a traceparent of
// the same trace.
func TestTracingSpanTreeOfCreate(t *testing.T) {
	rec := withTracing(t)
	seen := &traceparents{}
	b := setupWith(t, setupOptions{providerHTTP: provider.PooledHTTP(provider.DefaultCallTimeout), simWrap: seen.wrap})

	const incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	remoteParent, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	r := b.do(http.MethodPost, "/v1/payments", []byte(visa("o-traced", 500)), map[string]string{
		"Authorization": "Bearer " + b.a.APIKey, "Idempotency-Key": "traced-1",
		"Content-Type": "application/json", "traceparent": incoming,
	})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)
	paymentID := r.Str("id")

	byID, server := spansOf(t, rec, traceID, "POST /v1/payments")
	t.Cleanup(func() {
		if t.Failed() {
			printTree(t, byID, server)
		}
	})
	require.Equal(t, remoteParent, server.Parent().SpanID(), "the incoming traceparent is continued")
	require.True(t, server.Parent().IsRemote())
	require.Equal(t, paymentID, attrOf(server, tracing.AttrPaymentID))
	require.Equal(t, b.a.ID, attrOf(server, tracing.AttrTenantID))
	require.Equal(t, "/v1/payments", attrOf(server, "http.route"))

	var txs, statements, providerCalls []sdktrace.ReadOnlySpan
	for _, s := range byID {
		if s != server {
			require.True(t, descendsFrom(byID, s, server), "span %q is below the request span", s.Name())
		}
		for _, kv := range s.Attributes() {
			v := kv.Value.String()
			require.NotContains(t, v, b.a.APIKey, "span %q attribute %s", s.Name(), kv.Key)
			require.NotContains(t, v, "pm_card_visa", "span %q attribute %s: no card data", s.Name(), kv.Key)
			require.NotContains(t, v, "sk_sim", "span %q attribute %s: no provider key", s.Name(), kv.Key)
		}
		switch {
		case s.Name() == "db.transaction":
			txs = append(txs, s)
		case attrOf(s, "db.system.name") == "postgresql" && attrOf(s, "db.query.text") != "":
			statements = append(statements, s)
		case s.SpanKind() == trace.SpanKindClient && s.Name() == "provider POST /v1/charges":
			providerCalls = append(providerCalls, s)
		}
	}
	require.NotEmpty(t, txs, "database transactions are spans")
	require.GreaterOrEqual(t, len(statements), 3, "database statements are spans")
	names := map[string]bool{}
	for _, s := range statements {
		names[s.Name()] = true
		require.NotContains(t, attrOf(s, "db.query.text"), "o-traced", "SQL without its arguments")
	}
	// A new payment's transactions are each one pipelined batch
	// (internal/payments/fast.go): key and attempt, then the outcome with
	// its event and the key's response.
	for _, name := range []string{"batch query IdemKeyInsert", "batch query AttemptInsertCalling",
		"batch query AttemptFinish", "batch query OutboxInsertMoved", "batch query IdemKeyCompleteMoved"} {
		require.True(t, names[name], "statements named after their sqlc query: %s in %v", name, names)
	}
	inTx := 0
	for _, s := range statements {
		for p, ok := byID[s.Parent().SpanID()]; ok; p, ok = byID[p.Parent().SpanID()] {
			if p.Name() == "db.transaction" {
				inTx++
				break
			}
		}
	}
	require.GreaterOrEqual(t, inTx, 5, "a transaction's statements are below it")

	require.Len(t, providerCalls, 1, "one provider call")
	call := providerCalls[0]
	got := seen.all()
	require.Len(t, got, 1)
	require.Equal(t, "00-"+traceID.String()+"-"+call.SpanContext().SpanID().String()+"-01", got[0],
		"the provider gets the traceparent of the call's span")

	var stored *string
	require.NoError(t, b.pool.QueryRow(t.Context(),
		`SELECT traceparent FROM outbox WHERE payment_id = $1 AND type = 'PaymentSucceeded'`, paymentID).Scan(&stored))
	require.NotNil(t, stored, "the event keeps the request's traceparent")
	require.True(t, strings.HasPrefix(*stored, "00-"+traceID.String()+"-"), "%s", *stored)
	sid, err := trace.SpanIDFromHex(strings.Split(*stored, "-")[2])
	require.NoError(t, err)
	require.Contains(t, byID, sid, "the event's parent span is one of the request's")
}

// Without an incoming traceparent a request starts a trace of its own, and
// each provider try is a span: a 503 answered twice and then a charge are
// three client spans under one request span, each try with its own
// traceparent.
func TestTracingProviderRetriesAreSpans(t *testing.T) {
	rec := withTracing(t)
	seen := &traceparents{}
	var mu sync.Mutex
	fails := 2
	flaky := func(next http.Handler) http.Handler {
		return seen.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			fail := r.Method == http.MethodPost && fails > 0
			if fail {
				fails--
			}
			mu.Unlock()
			if fail {
				http.Error(w, `{"error":{"code":"unavailable"}}`, http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		}))
	}
	b := setupWith(t, setupOptions{providerHTTP: provider.PooledHTTP(provider.DefaultCallTimeout), simWrap: flaky})
	r := b.pay(b.a, "traced-retry", visa("o-retry", 700))
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)

	var traceID trace.TraceID
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindClient && strings.HasPrefix(s.Name(), "provider ") {
			traceID = s.SpanContext().TraceID()
		}
	}
	require.True(t, traceID.IsValid(), "provider spans recorded")
	byID, server := spansOf(t, rec, traceID, "POST /v1/payments")
	require.False(t, server.Parent().IsValid(), "a new trace")
	var tries []sdktrace.ReadOnlySpan
	for _, s := range byID {
		if s.Name() == "provider POST /v1/charges" {
			require.True(t, descendsFrom(byID, s, server))
			tries = append(tries, s)
		}
	}
	require.Len(t, tries, 3, "each try is a span")
	got := seen.all()
	require.Len(t, got, 3)
	for _, tp := range got {
		require.True(t, strings.HasPrefix(tp, "00-"+traceID.String()+"-"), "%s", tp)
	}
	require.Len(t, map[string]bool{got[0]: true, got[1]: true, got[2]: true}, 3, "a traceparent per try")
}

// Off (the default), nothing is traced: the provider gets no traceparent,
// even when the caller sent one, and the event keeps none.
func TestTracingOffSendsNoTraceparent(t *testing.T) {
	t.Parallel()
	require.False(t, tracing.Enabled())
	seen := &traceparents{}
	b := setupWith(t, setupOptions{providerHTTP: provider.PooledHTTP(provider.DefaultCallTimeout), simWrap: seen.wrap})
	r := b.do(http.MethodPost, "/v1/payments", []byte(visa("o-untraced", 500)), map[string]string{
		"Authorization": "Bearer " + b.a.APIKey, "Idempotency-Key": "untraced-1", "Content-Type": "application/json",
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)
	require.Equal(t, []string{""}, seen.all(), "no traceparent to the provider")
	var stored *string
	require.NoError(t, b.pool.QueryRow(t.Context(),
		`SELECT traceparent FROM outbox WHERE payment_id = $1`, r.Str("id")).Scan(&stored))
	require.Nil(t, stored, "no traceparent on the event")
}

// A replay reads first: its database work is one read batch (the key, whose
// stored answer it replays), with no insert of the key, no other
// transaction, and no provider call. An API key already seen is
// authenticated without a query. Not parallel: tracing is process-wide.
func TestTracingReplayIsOneRead(t *testing.T) {
	rec := withTracing(t)
	b := setup(t)
	headers := func(traceparent string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + b.a.APIKey, "Idempotency-Key": "replay-read",
			"Content-Type": "application/json", "traceparent": traceparent}
	}
	first := b.do(http.MethodPost, "/v1/payments", []byte(visa("o-replay-read", 500)), headers("00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
	require.Equal(t, http.StatusCreated, first.Status, "%s", first)

	const replay = "00-6bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceID, _ := trace.TraceIDFromHex("6bf92f3577b34da6a3ce929d0e0e4736")
	again := b.do(http.MethodPost, "/v1/payments", []byte(visa("o-replay-read", 500)), headers(replay))
	require.Equal(t, http.StatusCreated, again.Status, "%s", again)
	require.True(t, again.Replayed())

	byID, server := spansOf(t, rec, traceID, "POST /v1/payments")
	t.Cleanup(func() {
		if t.Failed() {
			printTree(t, byID, server)
		}
	})
	var statements, txs []string
	for _, s := range byID {
		switch {
		case s.Name() == "db.transaction":
			txs = append(txs, s.Name())
		case attrOf(s, "db.system.name") == "postgresql" && attrOf(s, "db.query.text") != "":
			statements = append(statements, s.Name())
		}
		require.NotContains(t, s.Name(), "provider", "a replay calls no provider")
	}
	slices.Sort(statements)
	require.Equal(t, []string{"batch query IdemKeyGet", "batch query RoutingRulesGet"}, statements,
		"one read batch; no key insert, no authentication query")
	require.Len(t, txs, 1)
}
