package client

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults of Config.
const (
	DefaultTryTimeout = 15 * time.Second // longer than the service's own provider retries, so that a slow but normal create answers in one try
	DefaultTimeout    = 60 * time.Second
	DefaultMinBackoff = 200 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
)

// Config configures a Client. Only URLs is required.
type Config struct {
	// URLs are the service's base URLs ("http://127.0.0.1:8080"). Every
	// call sends its first try to URLs[0] and each retry to the next one,
	// round the list, like a load balancer would.
	URLs []string

	// APIKey is the tenant's key, sent as Authorization: Bearer APIKey.
	APIKey string

	// HTTPClient sends the requests; nil means a client of its own with
	// http.DefaultTransport's settings (or http.DefaultTransport itself when
	// the program replaced it with a RoundTripper that is not an
	// *http.Transport). Its Timeout, if any, applies on top of TryTimeout.
	HTTPClient *http.Client

	// TryTimeout bounds one HTTP request (one try): when it passes, the try
	// is abandoned and retried with the same key. Default DefaultTryTimeout.
	TryTimeout time.Duration

	// Timeout bounds one call, every try and every wait included; the
	// context's deadline, if earlier, wins. When it passes before a final
	// answer the call returns a *NotFinalError. Default DefaultTimeout.
	Timeout time.Duration

	// MinBackoff and MaxBackoff bound the jittered exponential wait between
	// tries; a Retry-After from the service is waited in full even when it
	// is longer. Defaults DefaultMinBackoff and DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration

	// Logger, if not nil, gets one Info record per retry (what happened and
	// how long the client waits).
	Logger *slog.Logger
}

// Client calls the payments service. It is safe for concurrent use, and
// keeps no state between calls but its HTTP connections.
type Client struct {
	urls       []string
	apiKey     string
	http       *http.Client
	tryTimeout time.Duration
	timeout    time.Duration
	minBackoff time.Duration
	maxBackoff time.Duration
	log        *slog.Logger
}

// New returns a client with cfg, or an error naming what is wrong in it.
func New(cfg Config) (*Client, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("paymentsvc client: no URLs")
	}
	c := &Client{
		apiKey:     cfg.APIKey,
		http:       cfg.HTTPClient,
		tryTimeout: orDefault(cfg.TryTimeout, DefaultTryTimeout),
		timeout:    orDefault(cfg.Timeout, DefaultTimeout),
		minBackoff: orDefault(cfg.MinBackoff, DefaultMinBackoff),
		maxBackoff: orDefault(cfg.MaxBackoff, DefaultMaxBackoff),
		log:        cfg.Logger,
	}
	for _, raw := range cfg.URLs {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("paymentsvc client: URL %q: want http(s)://host[:port][/prefix]", raw)
		}
		c.urls = append(c.urls, strings.TrimRight(u.String(), "/"))
	}
	for name, d := range map[string]time.Duration{
		"TryTimeout": cfg.TryTimeout, "Timeout": cfg.Timeout, "MinBackoff": cfg.MinBackoff, "MaxBackoff": cfg.MaxBackoff,
	} {
		if d < 0 {
			return nil, fmt.Errorf("paymentsvc client: %s %s is negative", name, d)
		}
	}
	if c.maxBackoff < c.minBackoff {
		return nil, fmt.Errorf("paymentsvc client: MaxBackoff %s is below MinBackoff %s", c.maxBackoff, c.minBackoff)
	}
	if c.http == nil {
		c.http = &http.Client{Transport: defaultTransport()}
	}
	return c, nil
}

// CloseIdleConnections closes the idle connections of the client's HTTP
// client.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// NewKey returns a new random idempotency key ("idem_" and 26 characters of
// base32, 130 random bits). Mint one per payment (or refund) intent, store
// it with the intent (the order row) before the first try, and pass the
// stored key to every try, after a crash or a timeout too: the service
// charges at most once per key.
func NewKey() string { return "idem_" + rand.Text() }

// defaultTransport is a clone of http.DefaultTransport, or, when the program
// replaced it with a RoundTripper that is not an *http.Transport (a tracing
// wrapper, say), that RoundTripper itself.
func defaultTransport() http.RoundTripper {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		return t.Clone()
	}
	return http.DefaultTransport
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
