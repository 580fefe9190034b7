package provider

import (
	"net"
	"net/http"
	"time"

	"github.com/acme/paymentsvc/internal/tracing"
)

// PooledHTTP returns the http.Client provider calls are made with: it keeps
// enough idle connections that concurrent payments reuse them instead of
// opening one per call. Every call is bounded by its context (Resilient
// gives each try callTimeout), and each phase of it is bounded by
// callTimeout on its own too, so that no call can outlive its budget even
// without a deadline: the TCP connect, the TLS handshake, and the wait for
// the answer's headers once the request is written. A connect or handshake
// that gives up obtained no connection: the call was not sent. Idle
// connections carry TCP keepalives, so one whose provider went silent is
// found dead rather than handed to the next call. With tracing on, every
// HTTP try is a span of its own and carries the caller's traceparent to the
// provider.
func PooledHTTP(callTimeout time.Duration) *http.Client {
	dialer := &net.Dialer{
		Timeout:         callTimeout,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3},
	}
	return &http.Client{Transport: tracing.Transport("provider", &http.Transport{
		Proxy: http.ProxyFromEnvironment, DialContext: dialer.DialContext, ForceAttemptHTTP2: true,
		MaxIdleConns: 256, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second,
		TLSHandshakeTimeout: callTimeout, ResponseHeaderTimeout: callTimeout, ExpectContinueTimeout: time.Second,
	})}
}
