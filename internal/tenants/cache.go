package tenants

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"time"

	"github.com/acme/paymentsvc/internal/db"
)

// Defaults of the authentication cache (docs/configuration.md,
// AUTH_CACHE_TTL).
const (
	DefaultCacheTTL         = 10 * time.Second
	DefaultCacheNegativeTTL = 2 * time.Second
	DefaultCacheSize        = 10000
)

// Cache authenticates API keys like Authenticate, keeping each answer for a
// short while so that most requests authenticate without a database round
// trip: a known key for TTL, an unknown one for NegativeTTL (at most Size
// answers of each kind; a full cache drops answers, never grows). A key
// revoked in the database therefore keeps working on a pod for up to TTL,
// and a key created after it was refused is refused for up to NegativeTTL.
// Database errors are not kept. A key is looked up by its SHA-256, as in the
// database; the hash the database returned was compared in constant time
// when the answer was kept.
type Cache struct {
	q           db.DBTX
	ttl, negTTL time.Duration
	size        int
	now         func() time.Time

	mu        sync.Mutex
	known     map[[sha256.Size]byte]entry
	unknown   map[[sha256.Size]byte]time.Time // until when the key is refused
	lastSwept time.Time
	sweeps    int // how many sweeps were made (tests)
}

type entry struct {
	tenant Tenant
	until  time.Time
}

// CacheConfig sizes a Cache; zero fields take the defaults. A negative TTL
// turns the cache off (every request asks the database).
type CacheConfig struct {
	TTL, NegativeTTL time.Duration
	Size             int
}

// NewCache returns a cache of q's tenants.
func NewCache(q db.DBTX, cfg CacheConfig) *Cache {
	if cfg.TTL == 0 {
		cfg.TTL = DefaultCacheTTL
	}
	if cfg.NegativeTTL == 0 {
		cfg.NegativeTTL = min(DefaultCacheNegativeTTL, max(cfg.TTL, 0))
	}
	if cfg.Size <= 0 {
		cfg.Size = DefaultCacheSize
	}
	return &Cache{
		q: q, ttl: cfg.TTL, negTTL: cfg.NegativeTTL, size: cfg.Size, now: time.Now,
		known: map[[sha256.Size]byte]entry{}, unknown: map[[sha256.Size]byte]time.Time{},
	}
}

// Authenticate returns the tenant whose API key is apiKey (ErrUnauthorized
// if none), from the cache while its answer is fresh.
func (c *Cache) Authenticate(ctx context.Context, apiKey string) (Tenant, error) {
	if apiKey == "" {
		return Tenant{}, ErrUnauthorized
	}
	if c.ttl < 0 {
		return Authenticate(ctx, c.q, apiKey)
	}
	sum := sha256.Sum256([]byte(apiKey))
	now := c.now()
	c.mu.Lock()
	e, hit := c.known[sum]
	refusedUntil, refused := c.unknown[sum]
	c.mu.Unlock()
	if hit && now.Before(e.until) {
		return e.tenant, nil
	}
	if refused && now.Before(refusedUntil) {
		return Tenant{}, ErrUnauthorized
	}

	t, err := authenticateSum(ctx, c.q, sum)
	switch {
	case err == nil:
		c.put(func() { c.known[sum] = entry{tenant: t, until: now.Add(c.ttl)}; delete(c.unknown, sum) })
	case errors.Is(err, ErrUnauthorized) && c.negTTL > 0:
		c.put(func() { c.unknown[sum] = now.Add(c.negTTL); delete(c.known, sum) })
	}
	return t, err
}

// put stores an answer, first making room: expired answers go (at most once
// a second), then, if still full, arbitrary ones. Not a sweep whenever full:
// a flood of unknown keys keeps the refusals full, and every answer stored
// would then look through all of both maps under the lock every request takes.
func (c *Cache) put(store func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if now.Sub(c.lastSwept) > time.Second {
		c.lastSwept = now
		c.sweeps++
		for k, e := range c.known {
			if !now.Before(e.until) {
				delete(c.known, k)
			}
		}
		for k, until := range c.unknown {
			if !now.Before(until) {
				delete(c.unknown, k)
			}
		}
	}
	for k := range c.known {
		if len(c.known) < c.size {
			break
		}
		delete(c.known, k)
	}
	for k := range c.unknown {
		if len(c.unknown) < c.size {
			break
		}
		delete(c.unknown, k)
	}
	store()
}
