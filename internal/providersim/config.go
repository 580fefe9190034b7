package providersim

import (
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"time"

	"github.com/acme/paymentsvc/internal/redact"
)

// Defaults applied by New to a zero Config field.
const (
	DefaultAddr          = "127.0.0.1:9300"
	DefaultAPIKey        = "sk_sim"
	DefaultWebhookSecret = "whsec_dev"
	// DefaultAuthTTL is how long an authorization stays capturable.
	DefaultAuthTTL = 168 * time.Hour
)

// The wire formats the provider API can speak (SIM_API).
const (
	APISim    = "sim"
	APIStripe = "stripe"
)

// Config configures a Server; zero fields take the defaults above.
type Config struct {
	// Addr is where ListenAndServe binds; Handler ignores it.
	Addr string
	// APIKey is the bearer token /v1/* requires.
	APIKey string
	// StateFile, when set, is where the state is persisted after every change.
	StateFile string
	// WebhookURL, when set, receives a signed event for each new charge and refund.
	WebhookURL string
	// WebhookSecret signs webhook deliveries (see SignatureHeader).
	WebhookSecret string
	// Latency delays every charge call until the faults are changed.
	Latency time.Duration
	// AuthTTL is how long a charge made with "capture":false stays
	// capturable (its capture_before is its creation plus AuthTTL).
	AuthTTL time.Duration
	// Logger receives JSON-able structured logs; nil discards them.
	Logger *slog.Logger
	// API is the wire format /v1/* speaks: APISim (the default) or
	// APIStripe (the subset of Stripe's API described in stripe.go). The
	// state, faults and control API are the same either way.
	API string

	// now is the clock of charges and expiries; nil means time.Now (tests
	// set it).
	now func() time.Time
}

// withDefaults fills zero fields and rejects values that cannot work.
func (c Config) withDefaults() (Config, error) {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.APIKey == "" {
		c.APIKey = DefaultAPIKey
	}
	if c.WebhookSecret == "" {
		c.WebhookSecret = DefaultWebhookSecret
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.AuthTTL == 0 {
		c.AuthTTL = DefaultAuthTTL
	}
	if c.API == "" {
		c.API = APISim
	}
	if c.API != APISim && c.API != APIStripe {
		return c, fmt.Errorf("API %q is not %s or %s", c.API, APISim, APIStripe)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Latency < 0 {
		return c, fmt.Errorf("latency %v is negative", c.Latency)
	}
	if c.AuthTTL < time.Second {
		return c, fmt.Errorf("authorization TTL %v is shorter than a second", c.AuthTTL)
	}
	if c.WebhookURL != "" {
		u, err := url.Parse(c.WebhookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c, fmt.Errorf("webhook URL %q is not an absolute http(s) URL", redact.URL(c.WebhookURL))
		}
	}
	return c, nil
}

// redactedWebhookURL is the webhook URL fit for a log line (no credentials).
func (c Config) redactedWebhookURL() string {
	return redact.URL(c.WebhookURL)
}
