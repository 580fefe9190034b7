package outbox

import (
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := Config{}.withDefaults()
	if err := c.validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if c.BatchSize != 100 || c.PollInterval != time.Second || c.Stream != "PAYMENTS" ||
		c.Subject != "payments.succeeded" || c.Source != "paymentsvc" || c.StreamSubjects[0] != "payments.>" ||
		c.StreamReplicas != 1 {
		t.Errorf("defaults = %+v", c)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		mod  func(*Config)
		want string
	}{
		"batch too big":        {func(c *Config) { c.BatchSize = MaxBatchSize + 1 }, "BatchSize"},
		"negative batch":       {func(c *Config) { c.BatchSize = -1 }, "BatchSize"},
		"tiny poll":            {func(c *Config) { c.PollInterval = time.Millisecond }, "PollInterval"},
		"ack wait over tx":     {func(c *Config) { c.PublishTimeout = time.Minute }, "PublishTimeout"},
		"backoff inverted":     {func(c *Config) { c.BackoffMax = time.Millisecond }, "BackoffMin"},
		"wildcard subject":     {func(c *Config) { c.Subject = "payments.*" }, "literal"},
		"subject not captured": {func(c *Config) { c.Subject = "orders.created" }, "do not match"},
		"bad stream name":      {func(c *Config) { c.Stream = "PAY.MENTS" }, "Stream"},
		"six replicas":         {func(c *Config) { c.StreamReplicas = 6 }, "StreamReplicas"},
		"negative replicas":    {func(c *Config) { c.StreamReplicas = -1 }, "StreamReplicas"},
		"retry past window":    {func(c *Config) { c.BackoffMax = MinDuplicateWindow }, "duplicate window"},
	} {
		c := Config{}
		tc.mod(&c)
		err := c.withDefaults().validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", name, err, tc.want)
		}
	}
	if _, err := NewRelay(nil, Config{}); err == nil {
		t.Error("NewRelay(nil pool) succeeded")
	}
}

func TestSubjectMatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		filter, subject string
		want            bool
	}{
		{"payments.>", "payments.succeeded", true},
		{"payments.>", "payments", false},
		{"payments.*", "payments.succeeded", true},
		{"payments.*", "payments.a.b", false},
		{"*.payments.>", "t1.payments.succeeded", true},
		{"payments.succeeded", "payments.succeeded", true},
		{"payments.succeeded", "payments.failed", false},
		{">", "anything.at.all", true},
	} {
		if got := subjectMatches(tc.filter, tc.subject); got != tc.want {
			t.Errorf("subjectMatches(%q, %q) = %v", tc.filter, tc.subject, got)
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	t.Parallel()
	lo, hi := 100*time.Millisecond, 2*time.Second
	for failures := 1; failures <= 12; failures++ {
		nominal := min(lo<<(failures-1), hi)
		for range 50 {
			d := backoff(failures, lo, hi)
			if d < nominal/2 || d > nominal {
				t.Fatalf("backoff(%d) = %s, want in [%s, %s]", failures, d, nominal/2, nominal)
			}
		}
	}
	for range 50 {
		if d := jitter(time.Second); d < 900*time.Millisecond || d > 1100*time.Millisecond {
			t.Fatalf("jitter(1s) = %s", d)
		}
	}
}
