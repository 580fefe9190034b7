package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/build"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/client"
	"github.com/acme/paymentsvc/internal/testkit"
)

// These tests drive the retry policy against scripted HTTP servers, one
// answer at a time; process_test.go plays the same rules against the real
// service.

// seen is one request a scripted server received.
type seen struct {
	server, method, path, query, key, body string
	at                                     time.Time
}

// script answers the n-th request (over all its servers) with answers[n],
// repeating the last one, and records every request.
type script struct {
	mu      sync.Mutex
	answers []http.HandlerFunc
	reqs    []seen
}

func newScript(answers ...http.HandlerFunc) *script { return &script{answers: answers} }

// serve starts a server named name that answers from the script.
func (s *script) serve(t *testing.T, name string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		n := len(s.reqs)
		s.reqs = append(s.reqs, seen{server: name, method: r.Method, path: r.URL.EscapedPath(), query: r.URL.RawQuery,
			key: r.Header.Get("Idempotency-Key"), body: string(body), at: time.Now()})
		answer := s.answers[min(n, len(s.answers)-1)]
		s.mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (s *script) requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.reqs...)
}

func problemAnswer(status int, code client.Code, retryAfter int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("X-Request-Id", "req_test")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"type": "https://paymentsvc.example/problems/" + code, "title": http.StatusText(status),
			"status": status, "detail": "detail of " + string(code), "code": code, "payment_id": "pay_other",
		})
	}
}

func paymentAnswer(status int, st client.Status) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := map[string]any{
			"id": "pay_1", "order_id": "o-1", "amount": 500, "currency": "USD", "status": st, "provider": "sim",
			"provider_charge_id": nil, "failure_code": nil, "amount_refunded": 0, "amount_refundable": 0,
			"created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
		}
		if st == client.StatusFailed {
			p["failure_code"] = "card_declined"
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(p)
	}
}

func textAnswer(status int, ct, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// hangUp closes the connection without answering, like a pod that died.
func hangUp(w http.ResponseWriter, r *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// stall answers 201 only after the client gave up on the request.
func stall(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
}

// fastConfig has short waits, so that a retry costs milliseconds.
func fastConfig(urls ...string) client.Config {
	return client.Config{URLs: urls, APIKey: "sk_test", TryTimeout: 2 * time.Second, Timeout: 20 * time.Second,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
}

func newClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	c, err := client.New(cfg)
	require.NoError(t, err)
	t.Cleanup(c.CloseIdleConnections)
	return c
}

var visa = client.CreatePaymentRequest{OrderID: "o-1", Amount: 500, Currency: "USD", PaymentMethod: "pm_card_visa"}

// requireOneKeyOneBody requires every request to carry key and the same body.
func requireOneKeyOneBody(t *testing.T, reqs []seen, key string) {
	t.Helper()
	require.NotEmpty(t, reqs)
	for i, r := range reqs {
		require.Equal(t, key, r.key, "request %d's Idempotency-Key", i)
		require.Equal(t, reqs[0].body, r.body, "request %d's body", i)
	}
}

// Every answer that may change is retried with the same key and body, and
// the next answer counts.
func TestRetryRetriesWhatMayChange(t *testing.T) {
	t.Parallel()
	for name, first := range map[string]http.HandlerFunc{
		"connection closed":                        hangUp,
		"408":                                      textAnswer(408, "text/plain", "request timeout"),
		"409 idempotency_key_in_use":               problemAnswer(409, client.CodeIdempotencyKeyInUse, 1),
		"429":                                      problemAnswer(429, "rate_limited", 1),
		"500 internal_error":                       problemAnswer(500, client.CodeInternalError, 0),
		"502 from a proxy, not a problem":          textAnswer(502, "text/html", "<html>bad gateway</html>"),
		"503 provider_unavailable":                 problemAnswer(503, client.CodeProviderUnavailable, 1),
		"503 database_unavailable":                 problemAnswer(503, client.CodeDatabaseUnavailable, 1),
		"404 from a proxy, not a problem":          textAnswer(404, "text/plain", "404 page not found"),
		"201 that is not a payment":                textAnswer(201, "application/json", "{"),
		"202 UNKNOWN: resumed with the same key":   paymentAnswer(202, client.StatusUnknown),
		"202 PENDING: resumed with the same key":   paymentAnswer(202, client.StatusPending),
		"200 from a proxy's maintenance page, not": textAnswer(200, "text/html", "<html>maintenance</html>"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newScript(first, paymentAnswer(201, client.StatusSucceeded))
			c := newClient(t, fastConfig(s.serve(t, "a")))
			p, err := c.CreatePayment(context.Background(), "key-1", visa)
			require.NoError(t, err)
			require.Equal(t, client.StatusSucceeded, p.Status)
			reqs := s.requests()
			require.Len(t, reqs, 2)
			requireOneKeyOneBody(t, reqs, "key-1")
			require.JSONEq(t, `{"order_id":"o-1","amount":500,"currency":"USD","payment_method":"pm_card_visa"}`, reqs[0].body)
		})
	}
}

// A declined card is a final answer, not an error and not retried.
func TestRetryDeclineIsFinal(t *testing.T) {
	t.Parallel()
	s := newScript(paymentAnswer(402, client.StatusFailed))
	c := newClient(t, fastConfig(s.serve(t, "a")))
	p, err := c.CreatePayment(context.Background(), "key-1", visa)
	require.NoError(t, err)
	require.Equal(t, client.StatusFailed, p.Status)
	require.Equal(t, "card_declined", *p.FailureCode)
	require.Len(t, s.requests(), 1)
}

// A refusal that retrying cannot change comes back at once as a *Problem.
func TestRetryNeverRetriesRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		code   client.Code
	}{
		{400, client.CodeInvalidRequest},
		{400, client.CodeIdempotencyKeyInvalid},
		{401, client.CodeUnauthorized},
		{404, client.CodePaymentNotFound},
		{404, client.CodeNotFound},
		{409, client.CodeOrderAlreadyHasPayment},
		{409, client.CodePaymentNotRefundable},
		{413, client.CodePayloadTooLarge},
		{415, client.CodeUnsupportedMediaType},
		{422, client.CodeIdempotencyKeyReused},
		{422, client.CodeRefundExceedsRefundable},
	} {
		t.Run(fmt.Sprint(tc.status, " ", tc.code), func(t *testing.T) {
			t.Parallel()
			s := newScript(problemAnswer(tc.status, tc.code, 0), paymentAnswer(201, client.StatusSucceeded))
			c := newClient(t, fastConfig(s.serve(t, "a")))
			_, err := c.CreatePayment(context.Background(), "key-1", visa)
			p, ok := errors.AsType[*client.Problem](err)
			require.True(t, ok, "want a *Problem, got %v", err)
			require.Equal(t, tc.code, p.Code)
			require.Equal(t, tc.code, client.CodeOf(err))
			require.Equal(t, tc.status, p.Status)
			require.Equal(t, "detail of "+string(tc.code), p.Detail)
			require.Equal(t, "pay_other", p.PaymentID)
			require.Equal(t, "req_test", p.RequestID)
			require.Equal(t, "key-1", p.IdempotencyKey)
			require.Len(t, s.requests(), 1, "not retried")
		})
	}
}

// A 409 idempotency_key_in_use is retried only after its Retry-After, and
// each try goes to the next URL, round the list.
func TestRetryHonoursRetryAfterAndRotatesURLs(t *testing.T) {
	t.Parallel()
	s := newScript(
		hangUp,
		problemAnswer(409, client.CodeIdempotencyKeyInUse, 2),
		problemAnswer(503, client.CodeDatabaseUnavailable, 1),
		paymentAnswer(201, client.StatusSucceeded),
	)
	c := newClient(t, fastConfig(s.serve(t, "a"), s.serve(t, "b"), s.serve(t, "c")))
	p, err := c.CreatePayment(context.Background(), "key-1", visa)
	require.NoError(t, err)
	require.Equal(t, client.StatusSucceeded, p.Status)
	reqs := s.requests()
	require.Len(t, reqs, 4)
	requireOneKeyOneBody(t, reqs, "key-1")
	var servers []string
	for _, r := range reqs {
		servers = append(servers, r.server)
	}
	require.Equal(t, []string{"a", "b", "c", "a"}, servers, "the first try to the first URL, each retry to the next")
	require.GreaterOrEqual(t, reqs[2].at.Sub(reqs[1].at), 2*time.Second, "Retry-After of the 409")
	require.GreaterOrEqual(t, reqs[3].at.Sub(reqs[2].at), time.Second, "Retry-After of the 503")
}

// A try that outlives TryTimeout is abandoned and retried with the same key.
func TestRetryTryTimeoutRetries(t *testing.T) {
	t.Parallel()
	s := newScript(stall, paymentAnswer(201, client.StatusSucceeded))
	cfg := fastConfig(s.serve(t, "a"))
	cfg.TryTimeout = 200 * time.Millisecond
	c := newClient(t, cfg)
	start := time.Now()
	p, err := c.CreatePayment(context.Background(), "key-1", visa)
	require.NoError(t, err)
	require.Equal(t, client.StatusSucceeded, p.Status)
	require.Less(t, time.Since(start), 5*time.Second, "the stalled try was abandoned")
	requireOneKeyOneBody(t, s.requests(), "key-1")
	require.Len(t, s.requests(), 2)
}

// At the deadline the error carries the key and the last known payment, and
// says it was the deadline.
func TestRetryDeadlineCarriesKeyAndLastState(t *testing.T) {
	t.Parallel()
	s := newScript(paymentAnswer(202, client.StatusUnknown))
	cfg := fastConfig(s.serve(t, "a"))
	cfg.Timeout = 500 * time.Millisecond
	c := newClient(t, cfg)
	_, err := c.CreatePayment(context.Background(), "key-1", visa)
	nf, ok := errors.AsType[*client.NotFinalError](err)
	require.True(t, ok, "want a *NotFinalError, got %v", err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, "key-1", nf.IdempotencyKey)
	require.NotNil(t, nf.Payment)
	require.Equal(t, "pay_1", nf.Payment.ID)
	require.Equal(t, client.StatusUnknown, nf.Payment.Status)
	require.GreaterOrEqual(t, nf.Tries, len(s.requests()), "a try cut by the deadline may not have reached the server")
	require.Greater(t, nf.Tries, 1, "202s were resumed until the deadline")
	require.Contains(t, err.Error(), `resume with Idempotency-Key "key-1"`)
	requireOneKeyOneBody(t, s.requests(), "key-1")
}

// A Retry-After that ends past the deadline ends the call at once: there is
// no try left to wait for.
func TestRetryAfterBeyondTheDeadlineEndsTheCall(t *testing.T) {
	t.Parallel()
	s := newScript(problemAnswer(409, client.CodeIdempotencyKeyInUse, 30))
	cfg := fastConfig(s.serve(t, "a"))
	cfg.Timeout = 5 * time.Second
	c := newClient(t, cfg)
	start := time.Now()
	_, err := c.CreatePayment(context.Background(), "key-1", visa)
	require.Less(t, time.Since(start), 4*time.Second)
	nf, ok := errors.AsType[*client.NotFinalError](err)
	require.True(t, ok, "want a *NotFinalError, got %v", err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Nil(t, nf.Payment, "nothing was reported about the payment")
	require.Equal(t, client.CodeIdempotencyKeyInUse, client.CodeOf(nf.Last))
	require.Len(t, s.requests(), 1)
}

// Nothing listening: every try is refused, and the call ends at its
// deadline with the key and no payment.
func TestRetryNothingListening(t *testing.T) {
	t.Parallel()
	cfg := fastConfig(testkit.RefusedURL(t, "http"))
	cfg.Timeout = 300 * time.Millisecond
	c := newClient(t, cfg)
	_, err := c.CreatePayment(context.Background(), "key-1", visa)
	nf, ok := errors.AsType[*client.NotFinalError](err)
	require.True(t, ok, "want a *NotFinalError, got %v", err)
	require.Equal(t, "key-1", nf.IdempotencyKey)
	require.Nil(t, nf.Payment)
	_, transport := errors.AsType[*client.TransportError](nf.Last)
	require.True(t, transport, "last: %v", nf.Last)
	require.Greater(t, nf.Tries, 1)
}

// A create without a key sends nothing.
func TestCreateWithoutKeySendsNothing(t *testing.T) {
	t.Parallel()
	s := newScript(paymentAnswer(201, client.StatusSucceeded))
	c := newClient(t, fastConfig(s.serve(t, "a")))
	_, err := c.CreatePayment(context.Background(), "", visa)
	require.ErrorIs(t, err, client.ErrMissingKey)
	_, err = c.CreateRefund(context.Background(), "pay_1", "", client.CreateRefundRequest{})
	require.ErrorIs(t, err, client.ErrMissingKey)
	require.Empty(t, s.requests())
}

// NewKey mints distinct keys the service accepts (visible ASCII, 1–255).
func TestNewKey(t *testing.T) {
	t.Parallel()
	a, b := client.NewKey(), client.NewKey()
	require.NotEqual(t, a, b)
	for _, k := range []string{a, b} {
		require.LessOrEqual(t, len(k), 255)
		for _, r := range k {
			require.True(t, r >= 0x21 && r <= 0x7e, "key %q", k)
		}
	}
}

// ListPayments follows the pages with starting_after, and stops fetching
// when the caller stops iterating.
func TestListPaymentsIteratesPages(t *testing.T) {
	t.Parallel()
	page := func(ids []string, more bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var data []map[string]any
			for _, id := range ids {
				data = append(data, map[string]any{"id": id, "status": "SUCCEEDED"})
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"data": data, "has_more": more})
		}
	}
	s := newScript(page([]string{"pay_3", "pay_2"}, true), problemAnswer(503, client.CodeDatabaseUnavailable, 0), page([]string{"pay_1"}, false))
	c := newClient(t, fastConfig(s.serve(t, "a")))
	var ids []string
	for p, err := range c.ListPayments(context.Background(), client.ListPaymentsParams{OrderID: "o 1", Limit: 2}) {
		require.NoError(t, err)
		ids = append(ids, p.ID)
	}
	require.Equal(t, []string{"pay_3", "pay_2", "pay_1"}, ids)
	reqs := s.requests()
	require.Len(t, reqs, 3, "the 503 was retried")
	require.Equal(t, "/v1/payments", reqs[0].path)
	require.Equal(t, "limit=2&order_id=o+1", reqs[0].query)
	require.Equal(t, "limit=2&order_id=o+1&starting_after=pay_2", reqs[2].query)

	s = newScript(page([]string{"pay_3", "pay_2"}, true))
	c = newClient(t, fastConfig(s.serve(t, "a")))
	for range c.ListPayments(context.Background(), client.ListPaymentsParams{}) {
		break
	}
	require.Len(t, s.requests(), 1, "no page fetched after the caller stopped")
	require.Equal(t, "limit=100", s.requests()[0].query, "pages of 100 by default")
}

// A list sequence may be ranged over again: each range starts from the
// params it was made with, whatever cursor an earlier range reached.
func TestListSequencesStartOverWhenRangedAgain(t *testing.T) {
	t.Parallel()
	s := newScript(func(w http.ResponseWriter, r *http.Request) { // two pages: x_2, then x_1
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("starting_after") == "x_3" {
			_, _ = io.WriteString(w, `{"data":[{"id":"x_2"}],"has_more":true}`)
		} else {
			_, _ = io.WriteString(w, `{"data":[{"id":"x_1"}],"has_more":false}`)
		}
	})
	c := newClient(t, fastConfig(s.serve(t, "a")))
	ctx := context.Background()
	payments := c.ListPayments(ctx, client.ListPaymentsParams{Limit: 2, StartingAfter: "x_3"})
	refunds := c.ListRefunds(ctx, "pay_1", client.ListRefundsParams{Limit: 2, StartingAfter: "x_3"})
	for range 2 {
		for range payments {
		}
		for range refunds {
		}
	}
	var queries []string
	for _, r := range s.requests() {
		queries = append(queries, r.path+"?"+r.query)
	}
	ranged := []string{
		"/v1/payments?limit=2&starting_after=x_3", "/v1/payments?limit=2&starting_after=x_2",
		"/v1/payments/pay_1/refunds?limit=2&starting_after=x_3", "/v1/payments/pay_1/refunds?limit=2&starting_after=x_2",
	}
	require.Equal(t, append(ranged, ranged...), queries, "the second range fetches the same pages as the first")
}

// A list error is yielded once and ends the iteration.
func TestListPaymentsYieldsTheError(t *testing.T) {
	t.Parallel()
	s := newScript(problemAnswer(400, client.CodeInvalidRequest, 0))
	c := newClient(t, fastConfig(s.serve(t, "a")))
	n := 0
	for p, err := range c.ListRefunds(context.Background(), "pay_1", client.ListRefundsParams{StartingAfter: "rfd_x"}) {
		n++
		require.Nil(t, p)
		require.Equal(t, client.CodeInvalidRequest, client.CodeOf(err))
	}
	require.Equal(t, 1, n)
	require.Equal(t, "/v1/payments/pay_1/refunds", s.requests()[0].path)
}

// PutRouting of no rules clears them with {"rules":[]} (null is refused).
func TestPutRoutingWithoutRulesClears(t *testing.T) {
	t.Parallel()
	s := newScript(textAnswer(200, "application/json", `{"rules":[]}`))
	c := newClient(t, fastConfig(s.serve(t, "a")))
	r, err := c.PutRouting(context.Background(), client.Routing{})
	require.NoError(t, err)
	require.Empty(t, r.Rules)
	require.Equal(t, "PUT", s.requests()[0].method)
	require.JSONEq(t, `{"rules":[]}`, s.requests()[0].body)
	require.Empty(t, s.requests()[0].key, "a PUT carries no Idempotency-Key")
}

// Cancelling the context ends a call that is waiting out a Retry-After at
// once, with a *NotFinalError that says so, and leaves no goroutine behind.
// Not parallel: it counts the process's goroutines.
func TestRetryCancelReturnsAtOnceWithoutLeaks(t *testing.T) {
	s := newScript(problemAnswer(503, client.CodeProviderUnavailable, 10))
	url := s.serve(t, "a")
	cfg := fastConfig(url)
	// The client logs its retry once it has the first answer and is about
	// to wait out its Retry-After: then the test cancels. (The server having
	// the request says nothing of whether the client has read the answer.)
	waiting := make(chan struct{}, 1)
	cfg.Logger = slog.New(signalHandler{waiting})
	c, err := client.New(cfg)
	require.NoError(t, err)
	before := runtime.NumGoroutine()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.CreatePayment(ctx, "key-1", visa)
		done <- err
	}()
	select {
	case <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not get to wait out the first answer's Retry-After within 10s")
	}
	cancel()
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not return within 5s of its context's cancellation")
	}
	require.ErrorIs(t, err, context.Canceled)
	nf, ok := errors.AsType[*client.NotFinalError](err)
	require.True(t, ok, "want a *NotFinalError, got %v", err)
	require.Equal(t, "key-1", nf.IdempotencyKey)
	require.Equal(t, client.CodeProviderUnavailable, client.CodeOf(nf.Last))
	require.Empty(t, client.CodeOf(err), "a call that did not finish is no refusal")

	c.CloseIdleConnections()
	testkit.Eventually(t, 10*time.Second, "the goroutines of the call are gone", func() bool {
		return runtime.NumGoroutine() <= before
	})
}

// A call cancelled while it waits to retry a try that outlived TryTimeout
// says it was cancelled, and only that: the try's own timeout is not the
// call's deadline.
func TestRetryCancelAfterATryTimeoutIsNoDeadline(t *testing.T) {
	t.Parallel()
	s := newScript(stall)
	cfg := fastConfig(s.serve(t, "a"))
	cfg.TryTimeout = 100 * time.Millisecond
	cfg.MinBackoff, cfg.MaxBackoff = 10*time.Second, 10*time.Second
	logs := &syncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	c := newClient(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.CreatePayment(ctx, "key-1", visa)
		done <- err
	}()
	testkit.Eventually(t, 10*time.Second, "the first try timed out and the call waits to retry", func() bool {
		return strings.Contains(logs.String(), "try timed out")
	})
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not return within 5s of its context's cancellation")
	}
	nf, ok := errors.AsType[*client.NotFinalError](err)
	require.True(t, ok, "want a *NotFinalError, got %v", err)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "cancelled, not past a deadline: %v", err)
	te, ok := errors.AsType[*client.TransportError](nf.Last)
	require.True(t, ok, "last: %v", nf.Last)
	require.True(t, te.Timeout, "the last try timed out")
	require.Equal(t, 1, nf.Tries)
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A program that replaced http.DefaultTransport with a RoundTripper of its
// own (tracing, say) still gets a client, that sends through it.
// Not parallel: it replaces http.DefaultTransport.
func TestNewWithAWrappedDefaultTransport(t *testing.T) {
	s := newScript(paymentAnswer(201, client.StatusSucceeded))
	url := s.serve(t, "a")
	wrapped := &countingTransport{next: http.DefaultTransport}
	saved := http.DefaultTransport
	http.DefaultTransport = wrapped
	t.Cleanup(func() { http.DefaultTransport = saved })

	var c *client.Client
	require.NotPanics(t, func() { c = newClient(t, fastConfig(url)) })
	p, err := c.CreatePayment(context.Background(), "key-1", visa)
	require.NoError(t, err)
	require.Equal(t, client.StatusSucceeded, p.Status)
	require.Equal(t, int64(1), wrapped.n.Load(), "sent through the program's transport")
}

type countingTransport struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// The client is importable by other modules: it depends on nothing under
// internal/.
func TestClientImportsNothingInternal(t *testing.T) {
	t.Parallel()
	pkg, err := build.ImportDir(".", 0)
	require.NoError(t, err)
	for _, imp := range pkg.Imports {
		require.False(t, strings.Contains(imp, "/internal"), "client imports %s", imp)
		require.False(t, strings.HasPrefix(imp, "github.com/acme/paymentsvc"), "client imports %s of this module", imp)
	}
}

// Reads carry no key, escape ids, and Sync reads ask with sync=true.
func TestReads(t *testing.T) {
	t.Parallel()
	s := newScript(paymentAnswer(200, client.StatusSucceeded))
	c := newClient(t, fastConfig(s.serve(t, "a")))
	ctx := context.Background()
	_, err := c.GetPayment(ctx, "pay_1")
	require.NoError(t, err)
	_, err = c.SyncPayment(ctx, "pay/../x")
	require.NoError(t, err)
	_, err = c.GetPayment(ctx, "")
	require.Error(t, err)
	reqs := s.requests()
	require.Len(t, reqs, 2, "an empty id is refused before sending")
	require.Equal(t, seen{server: "a", method: "GET", path: "/v1/payments/pay_1"}, seen{server: reqs[0].server, method: reqs[0].method, path: reqs[0].path, query: reqs[0].query, key: reqs[0].key})
	require.Equal(t, "/v1/payments/pay%2F..%2Fx", reqs[1].path, "escaped: one path segment")
	require.Equal(t, "sync=true", reqs[1].query)
	require.Empty(t, reqs[1].key)
}

// signalHandler is a slog.Handler that signals on c (without blocking) for
// every record.
type signalHandler struct{ c chan<- struct{} }

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) Handle(context.Context, slog.Record) error {
	select {
	case h.c <- struct{}{}:
	default:
	}
	return nil
}
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalHandler) WithGroup(string) slog.Handler      { return h }
