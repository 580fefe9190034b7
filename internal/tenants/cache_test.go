package tenants_test

import (
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/tenants"
	"github.com/acme/paymentsvc/internal/testdb"
)

// clock is a settable time for the cache.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// A known key is answered from memory for the TTL: a key revoked in the
// database (here its hash replaced) keeps working until then, and is
// refused after it. Unknown keys are refused from memory for the negative
// TTL: a key that appears meanwhile is accepted only after it.
func TestCacheKeepsAnswersForTheirTTL(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	ctx := t.Context()
	tn := testdb.Tenant(t, d.Pool, testdb.TenantOpts{})
	c := tenants.NewCache(d.Pool, tenants.CacheConfig{TTL: 10 * time.Second, NegativeTTL: 2 * time.Second})
	clk := &clock{t: time.Now()}
	c.SetClock(clk.now)

	got, err := c.Authenticate(ctx, tn.APIKey)
	require.NoError(t, err)
	require.Equal(t, tn.Tenant, got)

	// Revoked: the key's hash is no longer stored.
	_, err = d.Pool.Exec(ctx, `UPDATE tenants SET api_key_sha256 = $1 WHERE id = $2`, []byte("revoked-revoked-revoked-revoked!"), tn.ID)
	require.NoError(t, err)
	_, err = tenants.Authenticate(ctx, d.Pool, tn.APIKey)
	require.ErrorIs(t, err, tenants.ErrUnauthorized, "the database refuses it at once")
	clk.add(9 * time.Second)
	got, err = c.Authenticate(ctx, tn.APIKey)
	require.NoError(t, err, "within the TTL the pod still accepts it")
	require.Equal(t, tn.ID, got.ID)
	clk.add(time.Second)
	_, err = c.Authenticate(ctx, tn.APIKey)
	require.ErrorIs(t, err, tenants.ErrUnauthorized, "after the TTL it is refused")

	// Unknown, then created (the hash stored back): refused for the
	// negative TTL, then accepted.
	_, err = c.Authenticate(ctx, tn.APIKey)
	require.ErrorIs(t, err, tenants.ErrUnauthorized)
	sum := sha256.Sum256([]byte(tn.APIKey))
	_, err = d.Pool.Exec(ctx, `UPDATE tenants SET api_key_sha256 = $1 WHERE id = $2`, sum[:], tn.ID)
	require.NoError(t, err)
	clk.add(1900 * time.Millisecond)
	_, err = c.Authenticate(ctx, tn.APIKey)
	require.ErrorIs(t, err, tenants.ErrUnauthorized, "a refusal is kept for the negative TTL")
	clk.add(100 * time.Millisecond)
	got, err = c.Authenticate(ctx, tn.APIKey)
	require.NoError(t, err)
	require.Equal(t, tn.ID, got.ID)

	_, err = c.Authenticate(ctx, "")
	require.ErrorIs(t, err, tenants.ErrUnauthorized)
}

// The cache never holds more than its size of each kind of answer, however
// many keys are tried; answers still come right.
func TestCacheIsBounded(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	ctx := t.Context()
	const size = 50
	c := tenants.NewCache(d.Pool, tenants.CacheConfig{Size: size})
	var created []tenants.Created
	for i := range size + 10 {
		created = append(created, testdb.Tenant(t, d.Pool, testdb.TenantOpts{Name: fmt.Sprintf("shop %d", i)}))
	}
	for round := range 2 {
		for i, tn := range created {
			got, err := c.Authenticate(ctx, tn.APIKey)
			require.NoError(t, err)
			require.Equal(t, tn.ID, got.ID)
			_, err = c.Authenticate(ctx, fmt.Sprintf("sk_unknown_%d_%d", round, i))
			require.ErrorIs(t, err, tenants.ErrUnauthorized)
			known, unknown := c.Len()
			require.LessOrEqual(t, known, size)
			require.LessOrEqual(t, unknown, size)
		}
	}
}

// AUTH_CACHE_TTL=0s: every request asks the database, so a revoked key is
// refused at once.
func TestCacheOff(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	ctx := t.Context()
	tn := testdb.Tenant(t, d.Pool, testdb.TenantOpts{})
	c := tenants.NewCache(d.Pool, tenants.CacheConfig{TTL: -1})
	_, err := c.Authenticate(ctx, tn.APIKey)
	require.NoError(t, err)
	_, err = d.Pool.Exec(ctx, `UPDATE tenants SET api_key_sha256 = $1 WHERE id = $2`, []byte("revoked-revoked-revoked-revoked!"), tn.ID)
	require.NoError(t, err)
	_, err = c.Authenticate(ctx, tn.APIKey)
	require.ErrorIs(t, err, tenants.ErrUnauthorized)
	known, unknown := c.Len()
	require.Zero(t, known+unknown)
}

// A flood of unknown keys keeps the refusals full; storing each further
// answer must not look through every answer kept (under the lock every
// request takes): expired answers are looked for at most once a second,
// full or not. Before, each answer stored into a full cache swept both maps
// (about 0.25 ms at the default size, against 0.04 ms for the query).
func TestCacheFullOfRefusalsSweepsAtMostOnceASecond(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	ctx := t.Context()
	const size = 100
	tn := testdb.Tenant(t, d.Pool, testdb.TenantOpts{})
	c := tenants.NewCache(d.Pool, tenants.CacheConfig{Size: size})
	clk := &clock{t: time.Now()}
	c.SetClock(clk.now)
	for i := range size {
		_, err := c.Authenticate(ctx, fmt.Sprintf("sk_flood_%d", i))
		require.ErrorIs(t, err, tenants.ErrUnauthorized)
	}
	before := c.Sweeps()
	for i := range 3 * size {
		_, err := c.Authenticate(ctx, fmt.Sprintf("sk_more_%d", i))
		require.ErrorIs(t, err, tenants.ErrUnauthorized)
		known, unknown := c.Len()
		require.LessOrEqual(t, known, size)
		require.LessOrEqual(t, unknown, size)
	}
	got, err := c.Authenticate(ctx, tn.APIKey)
	require.NoError(t, err)
	require.Equal(t, tn.ID, got.ID)
	require.LessOrEqual(t, c.Sweeps()-before, 1, "sweeps within one second of a full cache")

	// A second later expired answers go again.
	clk.add(3 * time.Second)
	_, err = c.Authenticate(ctx, "sk_later")
	require.ErrorIs(t, err, tenants.ErrUnauthorized)
	known, unknown := c.Len()
	require.Equal(t, 1, known, "the tenant's answer is still fresh")
	require.Equal(t, 1, unknown, "only sk_later: the flood's refusals expired and were swept")
}
