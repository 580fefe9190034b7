package providersim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/acme/paymentsvc/internal/testkit"
)

// testAPIKey is the key every test server requires.
const testAPIKey = "sk_test_providersim"

// bundle is one simulator behind a real HTTP server, with a client for it.
type bundle struct {
	t      *testing.T
	sim    *Server
	url    string
	client *http.Client
}

// setup starts a simulator for cfg (APIKey defaults to testAPIKey) and stops it when the test ends.
func setup(t *testing.T, cfg Config) *bundle {
	t.Helper()
	if cfg.APIKey == "" {
		cfg.APIKey = testAPIKey
	}
	sim, err := New(cfg)
	noErr(t, err, "New")
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = sim.Close()
	})
	return &bundle{t: t, sim: sim, url: srv.URL, client: srv.Client()}
}

// reply is a response read in full.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// request builds a request; body is sent as is when it is a string, else as JSON.
func (b *bundle) request(method, path, key string, body any, auth bool) *http.Request {
	b.t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	default:
		raw, err := json.Marshal(v)
		noErr(b.t, err, "encode body")
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, b.url+path, rd)
	noErr(b.t, err, "new request")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+testAPIKey)
	}
	return req
}

// send performs req with client and reads the whole answer.
func send(t *testing.T, client *http.Client, req *http.Request) reply {
	t.Helper()
	r, err := roundTrip(client, req)
	noErr(t, err, req.Method+" "+req.URL.Path)
	return r
}

// roundTrip is send for a goroutine other than the test's: it returns the
// error instead of failing the test.
func roundTrip(client *http.Client, req *http.Request) (reply, error) {
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, fmt.Errorf("read body: %w", err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: raw}, nil
}

// sendTogether sends n requests (the i-th built by req(i)) from a goroutine
// each, released together (testkit.Together), and returns the replies in
// order; it ends the test when any call failed.
func (b *bundle) sendTogether(n int, req func(i int) *http.Request) []reply {
	b.t.Helper()
	reqs := make([]*http.Request, n)
	for i := range n {
		reqs[i] = req(i)
	}
	replies := make([]reply, n)
	errs := make([]error, n)
	testkit.Together(n, func(i int) {
		replies[i], errs[i] = roundTrip(b.client, reqs[i])
	})
	for i, err := range errs {
		if err != nil {
			b.t.Errorf("caller %d: %v", i, err)
		}
	}
	if b.t.Failed() {
		b.t.FailNow()
	}
	return replies
}

// do sends an authenticated request.
func (b *bundle) do(method, path, key string, body any) reply {
	b.t.Helper()
	return send(b.t, b.client, b.request(method, path, key, body, true))
}

// charge posts a charge under key.
func (b *bundle) charge(key string, amount int64, method string) reply {
	b.t.Helper()
	return b.do(http.MethodPost, "/v1/charges", key, chargeBody(amount, method))
}

func chargeBody(amount int64, method string) map[string]any {
	return map[string]any{"amount": amount, "currency": "USD", "payment_method": method, "reference": "pay_test"}
}

// setFaults replaces the fault set.
func (b *bundle) setFaults(f Faults) {
	b.t.Helper()
	r := send(b.t, b.client, b.request(http.MethodPut, "/_sim/faults", "", f, false))
	equal(b.t, r.status, http.StatusOK, "PUT /_sim/faults status")
}

func (b *bundle) stats() Stats {
	b.t.Helper()
	r := send(b.t, b.client, b.request(http.MethodGet, "/_sim/stats", "", nil, false))
	equal(b.t, r.status, http.StatusOK, "GET /_sim/stats status")
	return decode[Stats](b.t, r)
}

func (b *bundle) charges() []Charge {
	b.t.Helper()
	r := send(b.t, b.client, b.request(http.MethodGet, "/_sim/charges", "", nil, false))
	equal(b.t, r.status, http.StatusOK, "GET /_sim/charges status")
	return decode[struct{ Data []Charge }](b.t, r).Data
}

func decode[T any](t *testing.T, r reply) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decode %T from %q: %v", v, r.body, err)
	}
	return v
}

// errorCode is the error.code of an error answer.
func errorCode(t *testing.T, r reply) string {
	t.Helper()
	return decode[struct{ Error errorBody }](t, r).Error.Code
}

// eventually polls cond until it holds, failing the test after a deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func equal[T comparable](t *testing.T, got, want T, what string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func noErr(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
