package delivery_test

import (
	"context"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/delivery"
	"github.com/acme/paymentsvc/internal/testkit"
)

// hangingServer accepts connections and reads what it is sent, but never
// answers: a merchant endpoint that stopped responding.
type hangingServer struct {
	ln       net.Listener
	accepted atomic.Int32
	mu       sync.Mutex
	conns    []net.Conn
}

func newHangingServer(t testing.TB) *hangingServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h := &hangingServer{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.accepted.Add(1)
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range h.conns {
			_ = c.Close()
		}
	})
	return h
}

func (h *hangingServer) URL() string { return "http://" + h.ln.Addr().String() }

// TestHangingEndpointHoldsUpNoOther: an endpoint that accepts connections
// and never answers gets at most EndpointConcurrency attempts in flight,
// while every delivery to a healthy endpoint is made before the first of
// the hanging one's attempts has even timed out (a timeout long enough that
// the healthy ones cannot be waiting on it).
func TestHangingEndpointHoldsUpNoOther(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hang := newHangingServer(t)
	healthy := newReceiver(t, nil)
	stuck := b.endpoint(hang.URL())
	fine := b.endpoint(healthy.URL)
	const events = 60
	b.publishN(events)
	cfg := fastConfig()
	cfg.Timeout = 10 * time.Minute
	cfg.EndpointConcurrency = 4
	cfg.Concurrency = 32
	b.deliver(cfg)

	b.waitStatus(fine.ID, events, delivery.StatusDelivered, time.Minute)
	require.Len(t, healthy.requests(), events)
	testkit.Eventually(t, 30*time.Second, "the hanging endpoint's attempts under way", func() bool { return hang.accepted.Load() == 4 })
	require.Zero(t, b.count(`SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND attempts > 0`, stuck.ID),
		"no attempt of the hanging endpoint has ended")
	require.EqualValues(t, 4, hang.accepted.Load(), "EndpointConcurrency connections to the hanging endpoint, no more")
}

// TestHangingAttemptCostsOneTimeout: an attempt to an endpoint that never
// answers ends after Timeout with the error saying so, and is retried
// on the schedule.
func TestHangingAttemptCostsOneTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hang := newHangingServer(t)
	ep := b.endpoint(hang.URL())
	b.publishN(1)
	cfg := fastConfig()
	cfg.Timeout = 300 * time.Millisecond
	cfg.Schedule = []time.Duration{time.Hour}
	b.deliver(cfg)

	d := b.firstAttempt(ep.ID)
	require.Equal(t, delivery.StatusPending, d.Status)
	require.Equal(t, "no answer within 300ms", *d.LastError)
	require.Nil(t, d.LastStatusCode)
	require.NotNil(t, d.NextAttemptAt)
	require.True(t, d.NextAttemptAt.After(time.Now().Add(50*time.Minute)), "the next try after the schedule's hour: %s", d.NextAttemptAt)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM webhook_delivery_events WHERE delivery_id = $1 AND duration_ms >= 300`, d.ID),
		"the attempt lasted its timeout")
}

// TestRefusesNonPublicAddresses: without AllowPrivate, nothing connects to
// a loopback address, whether the URL names it (127.0.0.1, [::1],
// ::ffff:127.0.0.1) or names a host that resolves to it (localhost): the
// receiver, listening there, gets nothing, and each delivery fails at once
// saying why.
func TestRefusesNonPublicAddresses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	port := rc.Listener.Addr().(*net.TCPAddr).Port
	urls := []string{
		rc.URL,
		"http://localhost:" + strconv.Itoa(port) + "/hooks",
		"http://[::ffff:127.0.0.1]:" + strconv.Itoa(port),
		"http://[::1]:" + strconv.Itoa(port),
		"http://0.0.0.0:" + strconv.Itoa(port),
	}
	var eps []delivery.WithSecret
	for _, u := range urls {
		eps = append(eps, b.endpoint(u))
	}
	b.publishN(1)
	cfg := fastConfig()
	cfg.AllowPrivate = false
	b.deliver(cfg)

	for i, ep := range eps {
		d := b.waitStatus(ep.ID, 1, delivery.StatusFailed, 30*time.Second)[0]
		require.Equal(t, 1, d.Attempts, "%s: failed at once, never retried", urls[i])
		require.Nil(t, d.LastStatusCode)
		require.Contains(t, *d.LastError, "refused to connect to", urls[i])
		require.Contains(t, *d.LastError, "not a public one", urls[i])
	}
	require.Empty(t, rc.requests(), "nothing reached the receiver")
	require.Equal(t, len(urls), b.count(`SELECT count(*) FROM webhook_delivery_events WHERE reason = 'address_refused' AND to_status = 'failed'`))
}

// TestRedirectIsNotFollowed: a 3xx is the endpoint's answer, not a
// pointer to follow: the delivery is retried, and the redirect's target
// gets nothing.
func TestRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target := newReceiver(t, nil)
	redirect := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	ep := b.endpoint(redirect.URL)
	b.publishN(1)
	cfg := fastConfig()
	cfg.Schedule = []time.Duration{time.Hour}
	b.deliver(cfg)

	d := b.firstAttempt(ep.ID)
	require.Equal(t, delivery.StatusPending, d.Status)
	require.Equal(t, 307, *d.LastStatusCode)
	require.Equal(t, "HTTP 307: a redirect, which is not followed", *d.LastError)
	require.Empty(t, target.requests())
}

// TestLargeAnswerIsCut: of an answer, at most 64 KiB is read and
// last_error keeps a short printable excerpt.
func TestLargeAnswerIsCut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("\x00bad\ngateway " + strings.Repeat("é", 1<<20)))
	}))
	t.Cleanup(big.Close)
	ep := b.endpoint(big.URL)
	b.publishN(1)
	cfg := fastConfig()
	cfg.Schedule = []time.Duration{time.Hour}
	b.deliver(cfg)

	d := b.firstAttempt(ep.ID)
	require.Equal(t, 502, *d.LastStatusCode)
	require.True(t, strings.HasPrefix(*d.LastError, "HTTP 502: bad gateway éé"), *d.LastError)
	require.LessOrEqual(t, len(*d.LastError), 300)
}

// TestTLSIsVerified: an endpoint whose certificate the deliverer does not
// trust gets no delivery (the handshake fails, and the delivery is
// retried); one it trusts gets it.
func TestTLSIsVerified(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var got atomic.Int32
	tlsServer := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Add(1) }))
	t.Cleanup(tlsServer.Close)
	ep := b.endpoint(tlsServer.URL)
	b.publishN(1)

	untrusting := fastConfig()
	untrusting.Schedule = []time.Duration{time.Hour}
	stop := b.deliver(untrusting)
	d := b.firstAttempt(ep.ID)
	stop()
	require.Equal(t, delivery.StatusPending, d.Status)
	require.Contains(t, *d.LastError, "certificate")
	require.Zero(t, got.Load())

	_, err := b.endpoints.Retry(context.Background(), b.tenant, d.ID)
	require.NoError(t, err)
	trusting := fastConfig()
	trusting.RootCAs = x509.NewCertPool()
	trusting.RootCAs.AddCert(tlsServer.Certificate())
	b.deliver(trusting)
	b.waitStatus(ep.ID, 1, delivery.StatusDelivered, 30*time.Second)
	require.EqualValues(t, 1, got.Load())
}
