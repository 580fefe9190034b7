package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/testkit"

	"github.com/acme/paymentsvc/internal/provider"
)

// transportTimeout is the call timeout of these tests, and bound what §19
// allows a silent provider on top of it.
const (
	transportTimeout = 500 * time.Millisecond
	transportBound   = transportTimeout + time.Second
)

// callSilent makes one charge call through PooledHTTP(transportTimeout) to
// baseURL with a context that has no deadline, and returns its error,
// failing t if the call outlived transportBound.
func callSilent(t *testing.T, baseURL string) *provider.CallError {
	t.Helper()
	hc := provider.PooledHTTP(transportTimeout)
	start := time.Now()
	_, err := NewHTTPClient("sim", baseURL, testAPIKey, hc).PostCharge(context.Background(), chargeReq("k1"))
	require.Less(t, time.Since(start), transportBound, "the call outlived its timeout: %v", err)
	var ce *provider.CallError
	require.True(t, errors.As(err, &ce), "a *CallError: %v", err)
	return ce
}

// A provider that takes the request and never answers is a timeout of a
// call that may have been sent (UNKNOWN), even for a caller without a
// deadline: the transport waits for the answer's headers at most the call
// timeout.
func TestPooledHTTPBoundsTheWaitForAnAnswer(t *testing.T) {
	t.Parallel()
	answered := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-answered // never, while the test runs
	}))
	t.Cleanup(func() { close(answered); srv.Close() })
	ce := callSilent(t, srv.URL)
	require.Equal(t, provider.KindTimeout, ce.Kind, "%v", ce)
	require.True(t, ce.Sent, "the request was written: it may have charged")
}

// A provider whose TLS handshake never completes (the connection accepted,
// nothing answered) gives up after the call timeout without having sent
// anything: no connection was obtained.
func TestPooledHTTPBoundsTheTLSHandshake(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	proxy := testkit.StartTCPProxy(t, u.Host)
	proxy.Blackhole()
	ce := callSilent(t, "https://"+proxy.Addr())
	require.Equal(t, provider.KindTimeout, ce.Kind, "%v", ce)
	require.False(t, ce.Sent, "no connection: not sent")
}

// A provider host that takes no connection at all (its SYNs unanswered: a
// listener whose queue is full drops them) gives up after the call timeout,
// not sent.
func TestPooledHTTPBoundsTheConnect(t *testing.T) {
	t.Parallel()
	addr := fullListener(t)
	ce := callSilent(t, "http://"+addr)
	require.False(t, ce.Sent, "no connection: not sent: %v", ce)
	require.Equal(t, provider.KindTimeout, ce.Kind, "%v", ce)
}

// fullListener returns the address of a socket that listens with a
// backlog of 0 and never accepts: once one connection waits in its queue,
// the kernel drops further SYNs, and a connect to it hangs.
func fullListener(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, syscall.Listen(fd, 0))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	// Fill the queue; a connect that does not complete is fine too.
	for range 2 {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			t.Cleanup(func() { _ = c.Close() })
		}
	}
	return addr
}
