package ratelimit

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/testkit"
)

// clock is a manual clock for the limiter.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func TestOffWhenLimitIsZero(t *testing.T) {
	t.Parallel()
	l := New(Config{})
	require.Nil(t, l)
	for range 1000 {
		ok, _ := l.Allow("ten_a")
		require.True(t, ok)
	}
	require.Zero(t, l.Len())
}

func TestDefaultBurst(t *testing.T) {
	t.Parallel()
	for limit, want := range map[float64]int{0.1: 1, 0.5: 1, 1: 2, 1.2: 3, 10: 20, 100: 200} {
		require.Equal(t, want, DefaultBurst(limit), "limit %v", limit)
	}
}

// A bucket starts full: burst requests pass at once, the next is refused
// with the time until a token is free, and tokens come back at the rate.
func TestBucketStartsFullAndRefills(t *testing.T) {
	t.Parallel()
	c := newClock()
	l := New(Config{Limit: 2, Burst: 4, Now: c.now})
	for i := range 4 {
		ok, _ := l.Allow("ten_a")
		require.True(t, ok, "request %d of the burst", i)
	}
	ok, wait := l.Allow("ten_a")
	require.False(t, ok)
	require.Equal(t, 500*time.Millisecond, wait)
	require.Equal(t, 1, RetryAfterSeconds(wait))

	c.add(250 * time.Millisecond)
	ok, wait = l.Allow("ten_a")
	require.False(t, ok, "half a token is not a token")
	require.Equal(t, 250*time.Millisecond, wait)

	c.add(250 * time.Millisecond)
	ok, _ = l.Allow("ten_a")
	require.True(t, ok, "a whole token after 1/limit")
	ok, _ = l.Allow("ten_a")
	require.False(t, ok)
}

// Tenants have buckets of their own.
func TestTenantsAreIndependent(t *testing.T) {
	t.Parallel()
	c := newClock()
	l := New(Config{Limit: 1, Burst: 1, Now: c.now})
	ok, _ := l.Allow("ten_a")
	require.True(t, ok)
	ok, _ = l.Allow("ten_a")
	require.False(t, ok)
	ok, _ = l.Allow("ten_b")
	require.True(t, ok, "another tenant is unaffected")
}

// A slow rate: Retry-After is the whole seconds until the next token.
func TestRetryAfterRoundsUp(t *testing.T) {
	t.Parallel()
	c := newClock()
	l := New(Config{Limit: 0.25, Burst: 1, Now: c.now})
	ok, _ := l.Allow("ten_a")
	require.True(t, ok)
	c.add(time.Second + time.Millisecond)
	ok, wait := l.Allow("ten_a")
	require.False(t, ok)
	require.Equal(t, 3, RetryAfterSeconds(wait), "wait %s", wait)
	require.Equal(t, 1, RetryAfterSeconds(0))
	require.Equal(t, 1, RetryAfterSeconds(time.Nanosecond))
	require.Equal(t, 2, RetryAfterSeconds(1001*time.Millisecond))
}

// Buckets unused long enough to be full again are dropped, and a dropped
// tenant comes back with a full bucket, as if it had been kept.
func TestIdleBucketsAreEvicted(t *testing.T) {
	t.Parallel()
	c := newClock()
	l := New(Config{Limit: 10, Burst: 20, Now: c.now}) // full again after 2s
	for i := range 100 {
		ok, _ := l.Allow(fmt.Sprintf("ten_%d", i))
		require.True(t, ok)
	}
	require.Equal(t, 100, l.Len())
	c.add(1900 * time.Millisecond)
	_, _ = l.Allow("ten_0")
	require.Equal(t, 100, l.Len(), "not full yet: kept")
	c.add(200 * time.Millisecond)
	_, _ = l.Allow("ten_new")
	require.Equal(t, 2, l.Len(), "every bucket idle for 2s dropped; ten_0 (used 0.2s ago) and ten_new kept")
}

// However many tenants call, at most MaxTenants buckets are kept; the least
// recently used goes first.
func TestBucketsAreCapped(t *testing.T) {
	t.Parallel()
	c := newClock()
	l := New(Config{Limit: 1, Burst: 1, MaxTenants: 50, Now: c.now})
	for i := range 10_000 {
		_, _ = l.Allow(fmt.Sprintf("ten_%d", i))
		require.LessOrEqual(t, l.Len(), 50)
	}
	require.Equal(t, 50, l.Len())
	ok, _ := l.Allow("ten_9999")
	require.False(t, ok, "the most recent tenant's empty bucket is kept")
}

// Concurrent callers of one tenant get exactly burst tokens.
func TestConcurrentCallersShareTheBucket(t *testing.T) {
	t.Parallel()
	c := newClock()
	l := New(Config{Limit: 1, Burst: 7, Now: c.now})
	var mu sync.Mutex
	allowed := 0
	testkit.Together(40, func(int) {
		if ok, _ := l.Allow("ten_a"); ok {
			mu.Lock()
			allowed++
			mu.Unlock()
		}
	})
	require.Equal(t, 7, allowed)
}

func TestCheckLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		limit float64
		burst int
		ok    bool
	}{
		{0, 0, true}, {0, 5, true}, {1, 0, true}, {0.5, 10, true}, {1e6, 0, true},
		{1.0 / (365 * 24 * 3600), 1, true}, // one a year, burst 1: exactly the bound
		{1e-10, 0, false}, {1e-3, 1_000_000, false}, {-1, 0, false}, {1, -1, false},
		{math.Inf(1), 0, false}, {math.NaN(), 0, false},
	} {
		err := CheckLimit(c.limit, c.burst)
		if (err == nil) != c.ok {
			t.Errorf("CheckLimit(%v, %d) = %v, want ok %v", c.limit, c.burst, err, c.ok)
		}
	}
}
