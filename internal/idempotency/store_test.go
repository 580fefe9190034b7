package idempotency_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// longLock keeps a key locked for the whole test.
var longLock = idempotency.Config{LockTTL: 10 * time.Minute, KeyTTL: 48 * time.Hour}

// shortLock expires almost at once, for takeover tests.
var shortLock = idempotency.Config{LockTTL: 50 * time.Millisecond, KeyTTL: 48 * time.Hour}

type bundle struct {
	t      *testing.T
	pool   *db.Pool
	tenant string
}

func setup(t *testing.T) *bundle {
	t.Helper()
	d := testdb.New(t)
	return &bundle{t: t, pool: d.Pool, tenant: testdb.Tenant(t, d.Pool, testdb.TenantOpts{}).ID}
}

func fingerprint(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// acquire runs Acquire for key with a CREATED attempt for order as the new key's attempt.
func (b *bundle) acquire(ctx context.Context, cfg idempotency.Config, key, order string, fp []byte) (idempotency.Result, error) {
	return idempotency.Acquire(ctx, b.pool, cfg, b.tenant, key, fp, attempts.NewID(), testdb.InsertAttempt(attempts.New{
		TenantID: b.tenant, OrderID: order, IdempotencyKey: key, Amount: 500, Currency: "USD", PaymentMethod: "pm_card_visa",
	}))
}

func (b *bundle) mustAcquire(cfg idempotency.Config, key, order string, fp []byte) idempotency.Result {
	b.t.Helper()
	res, err := b.acquire(b.t.Context(), cfg, key, order, fp)
	require.NoError(b.t, err)
	return res
}

func (b *bundle) count(sql string, args ...any) int {
	b.t.Helper()
	var n int
	require.NoError(b.t, b.pool.QueryRow(b.t.Context(), sql, args...).Scan(&n))
	return n
}

func (b *bundle) keyRows(key string) int {
	return b.count("SELECT count(*) FROM idempotency_keys WHERE tenant_id = $1 AND key = $2", b.tenant, key)
}

// waitUnlocked polls, by the database clock, until key's lock has expired.
func (b *bundle) waitUnlocked(key string) {
	b.t.Helper()
	testkit.Eventually(b.t, 30*time.Second, "lock of "+key+" expires", func() bool {
		return b.count(`SELECT count(*) FROM idempotency_keys
			WHERE tenant_id = $1 AND key = $2 AND locked_until <= now()`, b.tenant, key) == 1
	})
}

func (b *bundle) complete(l idempotency.Lock, code int, body string) bool {
	b.t.Helper()
	var ok bool
	err := db.WithTx(b.t.Context(), b.pool, func(tx pgx.Tx) error {
		var err error
		ok, err = idempotency.Complete(b.t.Context(), tx, l, code, []byte(body))
		return err
	})
	require.NoError(b.t, err)
	return ok
}

func (b *bundle) hold(l idempotency.Lock) bool {
	b.t.Helper()
	var ok bool
	err := db.WithTx(b.t.Context(), b.pool, func(tx pgx.Tx) error {
		var err error
		ok, err = idempotency.Hold(b.t.Context(), tx, l)
		return err
	})
	require.NoError(b.t, err)
	return ok
}

// race runs fn on n goroutines released together and collects what each got.
func race(t *testing.T, n int, fn func() (idempotency.Result, error)) []idempotency.Result {
	t.Helper()
	results := make([]idempotency.Result, n)
	errs := make([]error, n)
	testkit.Together(n, func(i int) { results[i], errs[i] = fn() })
	for i, err := range errs {
		require.NoError(t, err, "racer %d", i)
	}
	return results
}

func TestAcquireRaceHasExactlyOneOwner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fp := fingerprint("req")
	results := race(t, 50, func() (idempotency.Result, error) {
		return b.acquire(context.Background(), longLock, "race-key", "o-race", fp)
	})
	var owners []idempotency.Result
	inUse := 0
	for _, r := range results {
		switch r.Outcome {
		case idempotency.Owned:
			owners = append(owners, r)
		case idempotency.InUse:
			inUse++
			require.GreaterOrEqual(t, r.RetryAfter, 1)
		default:
			require.Failf(t, "unexpected outcome", "%v", r.Outcome)
		}
	}
	require.Len(t, owners, 1)
	require.True(t, owners[0].Created)
	require.Equal(t, 49, inUse)
	for _, r := range results {
		require.Equal(t, owners[0].AttemptID, r.AttemptID, "every racer sees the one attempt")
	}
	require.Equal(t, 1, b.keyRows("race-key"))
	require.Equal(t, 1, b.count("SELECT count(*) FROM payment_attempts WHERE tenant_id = $1", b.tenant))
	require.Equal(t, 1, b.count("SELECT count(*) FROM payment_attempts WHERE id = $1", owners[0].AttemptID))
}

func TestTakeoverRaceAfterLockExpiryHasExactlyOneWinner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fp := fingerprint("req")
	first := b.mustAcquire(shortLock, "k", "o-1", fp)
	require.Equal(t, idempotency.Owned, first.Outcome)
	require.True(t, first.Created)
	b.waitUnlocked("k")

	// The winner locks for long, so a loser that looks again sees it in use.
	results := race(t, 20, func() (idempotency.Result, error) {
		return b.acquire(context.Background(), longLock, "k", "o-1", fp)
	})
	var winners []idempotency.Result
	for _, r := range results {
		switch r.Outcome {
		case idempotency.Owned:
			winners = append(winners, r)
		case idempotency.InUse:
		default:
			require.Failf(t, "unexpected outcome", "%v", r.Outcome)
		}
	}
	require.Len(t, winners, 1)
	w := winners[0]
	require.False(t, w.Created, "a takeover creates nothing")
	require.Equal(t, first.AttemptID, w.AttemptID)
	require.Greater(t, w.Lock.Token, first.Lock.Token)
	require.Equal(t, 1, b.keyRows("k"))
	require.Equal(t, 1, b.count("SELECT count(*) FROM payment_attempts WHERE tenant_id = $1", b.tenant))
}

func TestTakeOverForAttemptRaceHasExactlyOneWinner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.mustAcquire(longLock, "k", "o-1", fingerprint("req"))
	// Locked by a live owner: nobody may take it.
	_, ok, err := idempotency.TakeOverForAttempt(t.Context(), b.pool, longLock, first.AttemptID)
	require.NoError(t, err)
	require.False(t, ok)

	released, err := idempotency.Release(t.Context(), b.pool, first.Lock)
	require.NoError(t, err)
	require.True(t, released)

	const racers = 10
	locks := make([]idempotency.Lock, racers)
	won := make([]bool, racers)
	errs := make([]error, racers)
	testkit.Together(racers, func(i int) {
		locks[i], won[i], errs[i] = idempotency.TakeOverForAttempt(context.Background(), b.pool, longLock, first.AttemptID)
	})
	var winners []idempotency.Lock
	for i := range racers {
		require.NoError(t, errs[i], "racer %d", i)
		if won[i] {
			winners = append(winners, locks[i])
		}
	}
	require.Len(t, winners, 1)
	require.Greater(t, winners[0].Token, first.Lock.Token)
}

func TestStaleOwnerCannotCompleteOrRelease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fp := fingerprint("req")
	stale := b.mustAcquire(shortLock, "k", "o-1", fp)
	require.Equal(t, idempotency.Owned, stale.Outcome)
	require.True(t, b.hold(stale.Lock), "the owner holds its own lock")
	b.waitUnlocked("k")

	fresh := b.mustAcquire(longLock, "k", "o-1", fp)
	require.Equal(t, idempotency.Owned, fresh.Outcome)
	require.False(t, fresh.Created)
	require.NotEqual(t, stale.Lock.Token, fresh.Lock.Token)

	// The stale owner can prove nothing.
	require.False(t, b.hold(stale.Lock))
	require.False(t, b.complete(stale.Lock, 402, `{"stale":true}`))
	released, err := idempotency.Release(t.Context(), b.pool, stale.Lock)
	require.NoError(t, err)
	require.False(t, released)
	// …and its attempts changed nothing: the new owner still holds the key.
	again := b.mustAcquire(longLock, "k", "o-1", fp)
	require.Equal(t, idempotency.InUse, again.Outcome)

	require.True(t, b.hold(fresh.Lock))
	require.True(t, b.complete(fresh.Lock, 201, `{"id":"fresh"}`))

	// After completion, neither owner can write.
	require.False(t, b.complete(stale.Lock, 402, `{"stale":true}`))
	require.False(t, b.complete(fresh.Lock, 500, `{"twice":true}`))
	require.False(t, b.hold(stale.Lock))
	require.False(t, b.hold(fresh.Lock), "a completed key is held by nobody")
	for _, l := range []idempotency.Lock{stale.Lock, fresh.Lock} {
		released, err := idempotency.Release(t.Context(), b.pool, l)
		require.NoError(t, err)
		require.False(t, released)
	}

	replay := b.mustAcquire(longLock, "k", "o-1", fp)
	require.Equal(t, idempotency.Replay, replay.Outcome)
	require.Equal(t, 201, replay.ResponseCode)
	require.JSONEq(t, `{"id":"fresh"}`, string(replay.ResponseBody))
	require.Equal(t, fresh.AttemptID, replay.AttemptID)
}

func TestCompleteThenAcquireReplays(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fp := fingerprint("req")
	own := b.mustAcquire(longLock, "k", "o-1", fp)
	require.Equal(t, idempotency.Owned, own.Outcome)
	require.True(t, b.complete(own.Lock, 402, `{"status":"FAILED","failure_code":"card_declined"}`))

	for range 3 {
		r := b.mustAcquire(longLock, "k", "o-1", fp)
		require.Equal(t, idempotency.Replay, r.Outcome)
		require.Equal(t, 402, r.ResponseCode)
		require.JSONEq(t, `{"status":"FAILED","failure_code":"card_declined"}`, string(r.ResponseBody))
		require.Equal(t, own.AttemptID, r.AttemptID)
	}
	require.Equal(t, 1, b.keyRows("k"))
	require.Equal(t, 1, b.count("SELECT count(*) FROM payment_attempts WHERE tenant_id = $1", b.tenant))
}

func TestReleaseThenAcquireResumes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fp := fingerprint("req")
	own := b.mustAcquire(longLock, "k", "o-1", fp)
	released, err := idempotency.Release(t.Context(), b.pool, own.Lock)
	require.NoError(t, err)
	require.True(t, released)

	r := b.mustAcquire(longLock, "k", "o-1", fp)
	require.Equal(t, idempotency.Owned, r.Outcome)
	require.False(t, r.Created)
	require.Equal(t, own.AttemptID, r.AttemptID)
	require.Equal(t, idempotency.InUse, b.mustAcquire(longLock, "k", "o-1", fp).Outcome)
}

func TestDifferentFingerprintIsMismatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	own := b.mustAcquire(longLock, "k", "o-1", fingerprint("req"))
	require.Equal(t, idempotency.Owned, own.Outcome)

	// In progress: a different request is refused, not told to wait.
	require.Equal(t, idempotency.Mismatch, b.mustAcquire(longLock, "k", "o-1", fingerprint("other")).Outcome)

	require.True(t, b.complete(own.Lock, 201, `{"id":"x"}`))
	r := b.mustAcquire(longLock, "k", "o-1", fingerprint("other"))
	require.Equal(t, idempotency.Mismatch, r.Outcome)
	require.Empty(t, r.ResponseBody, "a mismatch reveals nothing of the stored response")
	require.Equal(t, 1, b.keyRows("k"))
}

func TestKeysAreScopedToTheTenant(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fp := fingerprint("req")
	mine := b.mustAcquire(longLock, "k", "o-1", fp)

	ob := &bundle{t: t, pool: b.pool, tenant: testdb.Tenant(t, b.pool, testdb.TenantOpts{Name: "other"}).ID}
	theirs := ob.mustAcquire(longLock, "k", "o-1", fp)
	require.Equal(t, idempotency.Owned, theirs.Outcome)
	require.True(t, theirs.Created)
	require.NotEqual(t, mine.AttemptID, theirs.AttemptID)
}

func TestOrderGuardRefusesSecondKeyAndLeavesNoKeyRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.mustAcquire(longLock, "k-1", "o-1", fingerprint("req-1"))
	require.Equal(t, idempotency.Owned, first.Outcome)

	_, err := b.acquire(t.Context(), longLock, "k-2", "o-1", fingerprint("req-2"))
	require.ErrorIs(t, err, db.ErrConflict)
	require.Equal(t, 0, b.keyRows("k-2"), "the refused key is rolled back with its attempt")
	require.Equal(t, 1, b.count("SELECT count(*) FROM payment_attempts WHERE tenant_id = $1", b.tenant))

	// Once the first payment has FAILED, the order may be paid under a new key.
	var moved bool
	err = db.WithTx(t.Context(), b.pool, func(tx pgx.Tx) error {
		var err error
		_, moved, err = attempts.Transition(t.Context(), tx, attempts.Change{
			ID: first.AttemptID, To: attempts.Failed, FailureCode: attempts.FailureAbandoned,
			Source: attempts.SourceAPI, Reason: "test",
		})
		return err
	})
	require.NoError(t, err)
	require.True(t, moved)
	r := b.mustAcquire(longLock, "k-2", "o-1", fingerprint("req-2"))
	require.Equal(t, idempotency.Owned, r.Outcome)
	require.True(t, r.Created)
}

// The gc deletes an expired key of a final payment, but not while a request
// holds its lock (docs/operations.md, "reconciler gc"): holding is the lock
// (locked_until, through the provider call), not only a row lock of a
// running transaction. A key taken over past its expiry, whose payment a
// webhook made final during the call, is still its owner's to complete; its
// answer then starts its expiry anew (§19).
func TestDeleteExpiredSkipsAKeyARequestHolds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	held := testdb.Attempt(t, b.pool, testdb.AttemptOpts{TenantID: b.tenant, Status: attempts.Succeeded, KeyState: testdb.KeyLocked})
	done := testdb.Attempt(t, b.pool, testdb.AttemptOpts{TenantID: b.tenant, Status: attempts.Succeeded, KeyState: testdb.KeyCompleted})
	_, err := b.pool.Exec(ctx, `UPDATE idempotency_keys SET expires_at = now() - interval '1 hour' WHERE tenant_id = $1`, b.tenant)
	require.NoError(t, err)

	n, err := idempotency.DeleteExpired(ctx, b.pool, 100)
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the key nobody holds")
	require.Zero(t, b.keyRows(done.IdempotencyKey))
	require.Equal(t, 1, b.keyRows(held.IdempotencyKey), "the held key is left to its owner")
	require.True(t, b.complete(held.Lock, 201, `{}`), "its owner still completes it")

	n, err = idempotency.DeleteExpired(ctx, b.pool, 100)
	require.NoError(t, err)
	require.Zero(t, n, "answered now, it is kept a whole TTL from now")
	_, err = b.pool.Exec(ctx, `UPDATE idempotency_keys SET expires_at = now() - interval '1 hour' WHERE tenant_id = $1`, b.tenant)
	require.NoError(t, err)
	n, err = idempotency.DeleteExpired(ctx, b.pool, 100)
	require.NoError(t, err)
	require.Equal(t, 1, n, "once that TTL has passed, it goes")
	require.Zero(t, b.keyRows(held.IdempotencyKey))
}

// TestTakeOverForAttemptPassesOverAFinishedOrMissingKey: a key that holds a
// final response, and an attempt with no key, are taken by nobody.
func TestTakeOverForAttemptPassesOverAFinishedOrMissingKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.mustAcquire(longLock, "k", "o-1", fingerprint("req"))
	done, err := idempotency.Complete(t.Context(), b.pool, first.Lock, 201, []byte(`{}`))
	require.NoError(t, err)
	require.True(t, done)

	_, ok, err := idempotency.TakeOverForAttempt(t.Context(), b.pool, shortLock, first.AttemptID)
	require.NoError(t, err)
	require.False(t, ok)

	_, ok, err = idempotency.TakeOverForAttempt(t.Context(), b.pool, shortLock, "pay_none")
	require.NoError(t, err)
	require.False(t, ok)
	_, ok, err = idempotency.TakeOverForRefund(t.Context(), b.pool, shortLock, "rfd_none")
	require.NoError(t, err)
	require.False(t, ok)
}
