package delivery

import (
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of Config.
const (
	DefaultTimeout             = 15 * time.Second
	DefaultConcurrency         = 512
	DefaultEndpointConcurrency = 16
	DefaultPollInterval        = time.Second
	DefaultShutdownGrace       = 5 * time.Second
)

// queueFactor is how many rounds of its EndpointConcurrency a pod holds of
// one endpoint that answers fast: a claim takes up to that many deliveries
// of it, so a backlog drains in large batches while the next claim is made.
// An endpoint the pod knows nothing of yet, or whose last attempt was slow,
// gets one round only (no queue), so an endpoint that hangs ties up
// EndpointConcurrency of the pod's Concurrency and no more.
const queueFactor = 16

// leaseSlack is what a claim's lease adds beyond its attempts' time for
// the write of their results.
const leaseSlack = 10 * time.Second

// Config configures a Deliverer. A zero field takes its default.
type Config struct {
	// Timeout bounds one attempt: connection, TLS, the request and the
	// answer's status (MERCHANT_WEBHOOK_TIMEOUT).
	Timeout time.Duration
	// Schedule is the wait before each retry (MERCHANT_WEBHOOK_RETRY_SCHEDULE);
	// after the last, a delivery that still got no 2xx is failed.
	Schedule []time.Duration
	// Concurrency bounds the deliveries the pod holds at once (claimed,
	// waiting for their endpoint, or in flight), so the attempts in flight too.
	Concurrency int
	// EndpointConcurrency bounds the attempts in flight to one endpoint.
	EndpointConcurrency int
	// PollInterval is how often the deliverer looks for due deliveries when
	// nothing woke it: retries whose time came, NOTIFYs lost.
	PollInterval time.Duration
	// AllowPrivate lets attempts connect to loopback, private and other
	// non-public addresses (MERCHANT_WEBHOOK_ALLOW_PRIVATE); development only.
	AllowPrivate bool
	// AllowHTTP lets attempts go to http:// URLs (MERCHANT_WEBHOOK_ALLOW_HTTP);
	// else such an endpoint's deliveries fail.
	AllowHTTP bool
	// RootCAs are the certificate authorities TLS trusts; nil: the system's
	// (which SSL_CERT_FILE and SSL_CERT_DIR change).
	RootCAs *x509.CertPool
	// ShutdownGrace is how long attempts in flight may still finish once
	// Run's context ends; then they are cut off and counted as failed.
	ShutdownGrace time.Duration
	// Logger receives the deliverer's logs; nil discards them.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Schedule == nil {
		c.Schedule = DefaultSchedule
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.EndpointConcurrency == 0 {
		c.EndpointConcurrency = DefaultEndpointConcurrency
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate refuses a configuration the deliverer cannot run with.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("Timeout %s is negative", c.Timeout))
	}
	if len(c.Schedule) > MaxScheduleLen {
		errs = append(errs, fmt.Errorf("Schedule has more than %d delays", MaxScheduleLen))
	}
	for _, d := range c.Schedule {
		if d <= 0 || d > MaxScheduleDelay {
			errs = append(errs, fmt.Errorf("Schedule delay %s is not between 0 and %s", d, MaxScheduleDelay))
		}
	}
	if c.Concurrency < 1 || c.EndpointConcurrency < 1 || c.EndpointConcurrency > c.Concurrency {
		errs = append(errs, fmt.Errorf("need 1 <= EndpointConcurrency (%d) <= Concurrency (%d)", c.EndpointConcurrency, c.Concurrency))
	}
	if c.PollInterval < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("PollInterval %s below 10ms", c.PollInterval))
	}
	if c.ShutdownGrace < 0 {
		errs = append(errs, fmt.Errorf("ShutdownGrace %s is negative", c.ShutdownGrace))
	}
	return errors.Join(errs...)
}

// endpointHold is the most deliveries of one fast endpoint the pod holds:
// queueFactor rounds, and never more than half the pod's Concurrency, so
// one endpoint's backlog leaves room for the others.
func (c Config) endpointHold() int {
	return max(c.EndpointConcurrency, min(queueFactor*c.EndpointConcurrency, c.Concurrency/2))
}

// lease is how far a claim moves a delivery's next_attempt_at: the longest
// a held delivery can take, waiting for its endpoint (at most Timeout: one
// that waited that long is given back) and then attempted (Timeout), plus
// the writing of the result. A pod that died holding it loses it then, and
// the delivery is due again for every pod.
func (c Config) lease() time.Duration { return 2*c.Timeout + leaseSlack }

// fast is how quick an endpoint's last attempt must have been for the pod
// to queue more than one round of deliveries for it.
func (c Config) fast() time.Duration { return min(time.Second, c.Timeout/4) }
