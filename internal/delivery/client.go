package delivery

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// maxDialTimeout bounds the connect and the TLS handshake of an attempt
// (never beyond its Timeout).
const maxDialTimeout = 10 * time.Second

// newClient is the HTTP client of the attempts. Every stage has its
// deadline (connect, TLS handshake, response headers, and the attempt's
// context over all), so an endpoint that accepts a connection and never
// answers costs one Timeout. The dialler refuses non-public addresses
// unless allowPrivate (refuseNonPublic, on the address actually dialled);
// no proxy is taken from the environment; certificates are always
// verified; redirects are answers, never followed.
func newClient(cfg Config) *http.Client {
	dialer := &net.Dialer{Timeout: min(cfg.Timeout, maxDialTimeout), KeepAlive: 30 * time.Second}
	if !cfg.AllowPrivate {
		dialer.Control = refuseNonPublic
	}
	transport := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: cfg.RootCAs},
		TLSHandshakeTimeout:    min(cfg.Timeout, maxDialTimeout),
		ResponseHeaderTimeout:  cfg.Timeout,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           cfg.Concurrency,
		MaxIdleConnsPerHost:    cfg.EndpointConcurrency,
		IdleConnTimeout:        90 * time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxAnswerBytes,
	}
	return &http.Client{
		Transport: transport,
		Timeout:   cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
