// Package ratelimit is the per-tenant token bucket of the tenant API
// (TENANT_RATE_LIMIT, TENANT_RATE_BURST): one bucket per tenant and pod,
// starting full, one token per request.
//
// Memory is bounded without a sweeper goroutine. Buckets are kept in the
// order of their last use; a bucket unused for longer than it takes to refill
// from empty (burst / limit) is full again, so dropping it loses nothing (a
// new one starts full). Every Allow drops such buckets from the old end, and
// at most MaxTenants are kept: past that the least recently used one is
// dropped even if it is not full yet, which can only let that tenant through
// a little early, never refuse anyone.
package ratelimit

import (
	"container/list"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultMaxTenants bounds the buckets kept in one pod (each is about 200
// bytes, so the cap is about 13 MiB).
const DefaultMaxTenants = 65536

// Config sets a Limiter's rate.
type Config struct {
	// Limit is the sustained requests per second of one tenant; 0 turns the
	// limiter off.
	Limit float64
	// Burst is the bucket's size; 0 means DefaultBurst(Limit).
	Burst int
	// MaxTenants caps the buckets kept; 0 means DefaultMaxTenants.
	MaxTenants int
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// MaxRefill is the longest an empty bucket may take to fill again
// (Burst / Limit): a smaller limit is a configuration mistake, and a much
// smaller one would overflow the time arithmetic and turn the limiter off.
const MaxRefill = 365 * 24 * time.Hour

// CheckLimit reports whether limit (requests per second; 0: off) with burst
// (0: DefaultBurst) is one the limiter can apply.
func CheckLimit(limit float64, burst int) error {
	if limit == 0 {
		return nil
	}
	if !(limit > 0) || math.IsInf(limit, 0) || burst < 0 {
		return fmt.Errorf("the rate limit (%v) must be a number of at least 0 and the burst (%d) not negative", limit, burst)
	}
	if burst == 0 {
		burst = DefaultBurst(limit)
	}
	if float64(burst)/limit > MaxRefill.Seconds() {
		return fmt.Errorf("a rate limit of %v per second with a burst of %d takes longer than %s to refill", limit, burst, MaxRefill)
	}
	return nil
}

// DefaultBurst is TENANT_RATE_BURST's default: max(1, ⌈2 × limit⌉).
func DefaultBurst(limit float64) int {
	return max(1, int(math.Ceil(2*limit)))
}

// Limiter holds one token bucket per tenant. It is safe for concurrent use.
type Limiter struct {
	limit      rate.Limit
	burst      int
	maxTenants int
	fullAfter  time.Duration // an unused bucket is full again after this
	now        func() time.Time

	mu      sync.Mutex
	buckets map[string]*list.Element // of *bucket
	lru     list.List                // most recently used at the front
}

type bucket struct {
	tenant   string
	lim      *rate.Limiter
	lastUsed time.Time
}

// New returns a Limiter for cfg, or nil when cfg.Limit is 0 (off). A nil
// *Limiter allows everything.
func New(cfg Config) *Limiter {
	if cfg.Limit <= 0 {
		return nil
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultBurst(cfg.Limit)
	}
	if cfg.MaxTenants <= 0 {
		cfg.MaxTenants = DefaultMaxTenants
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Limiter{
		limit: rate.Limit(cfg.Limit), burst: cfg.Burst, maxTenants: cfg.MaxTenants, now: cfg.Now,
		fullAfter: time.Duration(float64(cfg.Burst) / cfg.Limit * float64(time.Second)),
		buckets:   make(map[string]*list.Element),
	}
}

// Allow takes one token of tenant's bucket. When there is none it takes
// nothing and says how long until one is free.
func (l *Limiter) Allow(tenant string) (ok bool, retryAfter time.Duration) {
	if l == nil {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(tenant, now)
	if b.lim.AllowN(now, 1) {
		return true, 0
	}
	// Tokens refill at limit per second; the next whole token is free after
	// (1 - tokens) / limit.
	missing := 1 - b.lim.TokensAt(now)
	return false, time.Duration(missing / float64(l.limit) * float64(time.Second))
}

// bucket returns tenant's bucket, made full if it has none, marked used at
// now, after dropping the buckets that are full again and any above the cap.
func (l *Limiter) bucket(tenant string, now time.Time) *bucket {
	l.evict(now)
	if e, ok := l.buckets[tenant]; ok {
		b := e.Value.(*bucket)
		b.lastUsed = now
		l.lru.MoveToFront(e)
		return b
	}
	for len(l.buckets) >= l.maxTenants {
		l.drop(l.lru.Back())
	}
	b := &bucket{tenant: tenant, lim: rate.NewLimiter(l.limit, l.burst), lastUsed: now} // starts full
	l.buckets[tenant] = l.lru.PushFront(b)
	return b
}

// evict drops the least recently used buckets that are full again.
func (l *Limiter) evict(now time.Time) {
	for e := l.lru.Back(); e != nil; e = l.lru.Back() {
		if now.Sub(e.Value.(*bucket).lastUsed) < l.fullAfter {
			return
		}
		l.drop(e)
	}
}

func (l *Limiter) drop(e *list.Element) {
	delete(l.buckets, e.Value.(*bucket).tenant)
	l.lru.Remove(e)
}

// RetryAfterSeconds is wait as a Retry-After value: whole seconds, rounded
// up, at least 1.
func RetryAfterSeconds(wait time.Duration) int {
	return max(1, int(math.Ceil(wait.Seconds())))
}
