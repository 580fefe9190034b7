package outbox

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := Config{}.withDefaults()
	require.NoError(t, c.validate(), "defaults")
	require.Equal(t, 100, c.BatchSize)
	require.Equal(t, time.Second, c.PollInterval)
	require.Equal(t, 50*time.Millisecond, c.WakeInterval)
	require.Equal(t, 20*time.Millisecond, Config{PollInterval: 20 * time.Millisecond}.withDefaults().WakeInterval, "at most the poll")
	require.Equal(t, "PAYMENTS", c.Stream)
	require.Equal(t, "", c.SubjectPrefix)
	require.Equal(t, "paymentsvc", c.Source)
	require.Equal(t, []string{"payments.>"}, c.StreamSubjects)
	require.Equal(t, 1, c.StreamReplicas)
	// A silent server is noticed within seconds (§19).
	require.Equal(t, time.Second, c.PingInterval)
	require.Equal(t, 2*time.Second, c.FlushTimeout)
	require.Equal(t, 5*time.Second, c.PublishTimeout)
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
		"wake over poll":       {func(c *Config) { c.WakeInterval = 2 * time.Second }, "WakeInterval"},
		"negative wake":        {func(c *Config) { c.WakeInterval = -time.Second }, "WakeInterval"},
		"ack wait over tx":     {func(c *Config) { c.PublishTimeout = time.Minute }, "PublishTimeout"},
		"backoff inverted":     {func(c *Config) { c.BackoffMax = time.Millisecond }, "BackoffMin"},
		"wildcard prefix":      {func(c *Config) { c.SubjectPrefix = "t.*." }, "literal"},
		"subject not captured": {func(c *Config) { c.StreamSubjects = []string{"payments.succeeded"} }, "do not take"},
		"bad stream name":      {func(c *Config) { c.Stream = "PAY.MENTS" }, "Stream"},
		"six replicas":         {func(c *Config) { c.StreamReplicas = 6 }, "StreamReplicas"},
		"negative replicas":    {func(c *Config) { c.StreamReplicas = -1 }, "StreamReplicas"},
		"retry past window":    {func(c *Config) { c.BackoffMax = MinDuplicateWindow }, "duplicate window"},
		"negative ping":        {func(c *Config) { c.PingInterval = -time.Second }, "PingInterval"},
		"negative flush":       {func(c *Config) { c.FlushTimeout = -time.Second }, "FlushTimeout"},
		"negative listen ping": {func(c *Config) { c.ListenPing = -time.Second }, "ListenPing"},
	} {
		c := Config{}
		tc.mod(&c)
		require.ErrorContains(t, c.withDefaults().validate(), tc.want, name)
	}
	_, err := NewRelay(nil, Config{})
	require.Error(t, err, "NewRelay(nil pool)")
}

// TestEventSubjects: every event type has its subject on the stream.
func TestEventSubjects(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"PaymentSucceeded": "payments.succeeded", "PaymentFailed": "payments.failed",
		"PaymentRefunded": "payments.refunded", "PaymentRefundFailed": "payments.refund_failed",
		"PaymentAuthorized": "payments.authorized", "PaymentCanceled": "payments.canceled",
	}
	for typ, subject := range want {
		if got := Subject(typ); got != subject {
			t.Errorf("Subject(%q) = %q, want %q", typ, got, subject)
		}
	}
	if got := (Config{SubjectPrefix: "t1."}).withDefaults().subjects(); len(got) != 6 || got[0] != "t1.payments.succeeded" {
		t.Errorf("subjects = %q", got)
	}
	if Subject("Bogus") != "" {
		t.Error("an unknown type has a subject")
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
		require.Equal(t, tc.want, subjectMatches(tc.filter, tc.subject), "subjectMatches(%q, %q)", tc.filter, tc.subject)
	}
}

func TestBackoffBounds(t *testing.T) {
	t.Parallel()
	lo, hi := 100*time.Millisecond, 2*time.Second
	for failures := 1; failures <= 12; failures++ {
		nominal := min(lo<<(failures-1), hi)
		for range 50 {
			d := backoff(failures, lo, hi)
			require.True(t, d >= nominal/2 && d <= nominal, "backoff(%d) = %s, want in [%s, %s]", failures, d, nominal/2, nominal)
		}
	}
	for range 50 {
		d := jitter(time.Second)
		require.True(t, d >= 900*time.Millisecond && d <= 1100*time.Millisecond, "jitter(1s) = %s", d)
	}
}
