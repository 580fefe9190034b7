package payments_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/testdb"
)

// cachedPod is a service with a replay cache of maxBytes on a pool of its
// own, which the test closes to prove an answer came from memory: a closed
// pool fails every query.
type cachedPod struct {
	svc    *payments.Service
	pool   *db.Pool
	replay *idempotency.ReplayCache
}

func (b *bundle) cachedPod(cfg payments.Config, maxBytes int64) *cachedPod {
	b.t.Helper()
	pool, err := db.Open(b.ctx, testdb.URLFor(b.dbName()))
	require.NoError(b.t, err)
	b.t.Cleanup(pool.Close)
	svc, err := payments.NewService(pool, b.prov, cfg, nil)
	require.NoError(b.t, err)
	c := idempotency.NewReplayCache(maxBytes)
	svc.UseReplayCache(c)
	return &cachedPod{svc: svc, pool: pool, replay: c}
}

func (b *bundle) dbName() string {
	b.t.Helper()
	var name string
	require.NoError(b.t, b.pool.QueryRow(b.ctx, `SELECT current_database()`).Scan(&name))
	return name
}

// A replay the pod has read once is answered from its cache: the same
// status and body, byte for byte, with the database gone; a reuse of the key
// for another request is 422 from there too; and a key it never read still
// needs the database.
func TestReplayCacheAnswersWithoutTheDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.cachedPod(timings, idempotency.DefaultReplayCacheBytes)
	in := b.input("rc-1", "o-rc-1")
	first, err := p.svc.Create(b.ctx, in)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, first.Code)
	require.False(t, first.Replayed)
	require.Zero(t, p.replay.Len(), "the create's own answer is not cached: only a read of the stored key is")

	fromDB, err := p.svc.Create(b.ctx, in)
	require.NoError(t, err)
	require.True(t, fromDB.Replayed)
	require.Equal(t, 1, p.replay.Len(), "the replay read from the database is kept")
	stored := b.key("rc-1")
	require.Equal(t, stored.body, fromDB.Body)

	p.pool.Close()
	raw := []byte(`{"the raw body":1}`)
	_, sum, ok := p.svc.ReplayBody(in.TenantID, in.IdempotencyKey, raw)
	require.False(t, ok, "bytes the cache never replayed are decoded first")
	in.BodySum = sum
	hit, err := p.svc.Create(b.ctx, in)
	require.NoError(t, err, "answered without the database")
	want := payments.Reply{Code: int(*stored.code), Body: stored.body, Replayed: true, PaymentID: payment(t, first).ID}
	require.Equal(t, want, hit)
	// The same bytes again: answered before they are decoded.
	undecoded, _, ok := p.svc.ReplayBody(in.TenantID, in.IdempotencyKey, raw)
	require.True(t, ok, "the bytes the cache replayed are answered undecoded")
	require.Equal(t, want, undecoded)
	_, _, ok = p.svc.ReplayBody("ten_other", in.IdempotencyKey, raw)
	require.False(t, ok, "another tenant's key")

	other := in
	other.Fingerprint = []byte("another request")
	_, err = p.svc.Create(b.ctx, other)
	requireAppErr(t, err, apperr.IdempotencyKeyReused)

	_, err = p.svc.Create(b.ctx, b.input("rc-never-read", "o-rc-never-read"))
	require.Error(t, err, "a key the cache does not hold goes to the (closed) database")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM payment_attempts`), "one payment, charged once")
	require.Len(t, b.sim.Charges(t), 1)
}

// Only final answers are cached: a key whose payment is still at the
// provider answers 409 from the database and leaves nothing in the cache.
func TestReplayCacheKeepsNoAnswerThatIsNotFinal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.cachedPod(timings, idempotency.DefaultReplayCacheBytes)
	in := b.input("rc-pending", "o-rc-pending")
	s := newStall(t)
	b.prov.afterCall.Store(s)
	done := b.createAsync(p.svc, in)
	s.awaitReached(t)
	_, err := p.svc.Create(b.ctx, in)
	requireAppErr(t, err, apperr.IdempotencyKeyInUse)
	require.Zero(t, p.replay.Len(), "a key in use is not cached")
	s.release()
	r := awaitResult(t, done)
	require.NoError(t, r.err)
	require.Equal(t, http.StatusCreated, r.reply.Code)
	again, err := p.svc.Create(b.ctx, in)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, 1, p.replay.Len())
}

// An entry is never served at or past its key's expiry: then the database
// answers (here: closed, so the request fails rather than replays from
// memory), and once reconciler gc's DeleteExpired has deleted the key, the
// same request is a new one, as it would be on a pod without a cache (its
// order already has a payment: 409).
func TestReplayCacheEntryEndsWithItsKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	short := timings
	short.KeyTTL = 2 * time.Second
	p := b.cachedPod(short, idempotency.DefaultReplayCacheBytes)
	gone := b.cachedPod(short, idempotency.DefaultReplayCacheBytes) // the pod whose database goes away
	in := b.input("rc-exp", "o-rc-exp")
	first, err := p.svc.Create(b.ctx, in)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, first.Code)
	for _, pod := range []*cachedPod{p, gone} {
		r, err := pod.svc.Create(b.ctx, in)
		require.NoError(t, err)
		require.True(t, r.Replayed)
		require.Equal(t, 1, pod.replay.Len())
	}

	deadline := time.Now().Add(30 * time.Second)
	for b.count(`SELECT count(*) FROM idempotency_keys WHERE key = 'rc-exp' AND expires_at < now()`) == 0 {
		require.True(t, time.Now().Before(deadline), "the key did not expire within 30s")
		time.Sleep(50 * time.Millisecond)
	}
	gone.pool.Close()
	_, err = gone.svc.Create(b.ctx, in)
	require.Error(t, err, "an expired entry is not served: the request needs the database")
	require.Zero(t, gone.replay.Len(), "and it is dropped")

	n, err := idempotency.DeleteExpired(b.ctx, b.pool, 100)
	require.NoError(t, err)
	require.Equal(t, 1, n, "gc deleted the key")
	_, err = p.svc.Create(b.ctx, in)
	e := requireAppErr(t, err, apperr.OrderAlreadyHasPay)
	require.Equal(t, payment(t, first).ID, e.PaymentID,
		"the deleted key is not replayed from memory: the request is new, and its order already has that payment (as on a pod without a cache)")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM payment_attempts`))
	require.Len(t, b.sim.Charges(t), 1, "charged once")
}

// The cache holds what fits in REPLAY_CACHE_BYTES: with room for one entry,
// reading a second key evicts the first, which then needs the database.
func TestReplayCacheEvictsBySize(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// One stored answer is some 300 bytes of body plus the entry's
	// bookkeeping: 1,000 bytes hold one, not two.
	p := b.cachedPod(timings, 1000)
	a, c := b.input("rc-a", "o-rc-a"), b.input("rc-b", "o-rc-b")
	for _, in := range []payments.CreateInput{a, c, a, c} {
		_, err := p.svc.Create(b.ctx, in)
		require.NoError(t, err)
	}
	require.Equal(t, 1, p.replay.Len(), "room for one")
	require.LessOrEqual(t, p.replay.Bytes(), int64(1000))
	p.pool.Close()
	r, err := p.svc.Create(b.ctx, c)
	require.NoError(t, err, "the last read is kept")
	require.True(t, r.Replayed)
	_, err = p.svc.Create(b.ctx, a)
	require.Error(t, err, "the first was evicted: it needs the database")
}
