package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/db"
)

// Config holds the lock and retention periods of keys.
type Config struct {
	LockTTL time.Duration // how long an in-progress key stays locked to its owner
	KeyTTL  time.Duration // how long a key and its response are kept, from when the response is stored
}

// DefaultKeyTTL is IDEMPOTENCY_KEY_TTL's default.
const DefaultKeyTTL = 48 * time.Hour

// Outcome is what Acquire found.
type Outcome int

// The outcomes of Acquire.
const (
	// Owned: the caller now holds the key's lock (new key, or taken over).
	Owned Outcome = iota + 1
	// Replay: the key holds a final response; answer it.
	Replay
	// InUse: another owner holds the lock; retry after RetryAfter seconds.
	InUse
	// Mismatch: the key was used for a different request.
	Mismatch
)

// Lock identifies a held key lock; every write under it checks Token.
type Lock struct {
	TenantID string
	Key      string
	Token    int64
	// keyTTL is the Config.KeyTTL of whoever took the lock: the key expires
	// that long after its owner stores the final answer (Complete).
	keyTTL time.Duration
}

// lockOf is the lock of (tenantID, key) under token, taken with cfg.
func lockOf(cfg Config, tenantID, key string, token int64) Lock {
	return Lock{TenantID: tenantID, Key: key, Token: token, keyTTL: cfg.KeyTTL}
}

// keyTTLms is how long after its final answer (or its release) l's key is
// kept, in milliseconds: the owner's IDEMPOTENCY_KEY_TTL. The one rule of a
// key's expiry is here: it counts from the moment its owner stores the
// answer, whatever stores it (Complete, QueueCompleteMoved, and every
// operation that finishes a key through them). A Lock made by hand, not by
// Acquire or a takeover, keeps keys for DefaultKeyTTL.
func (l Lock) keyTTLms() int64 {
	if l.keyTTL > 0 {
		return l.keyTTL.Milliseconds()
	}
	return DefaultKeyTTL.Milliseconds()
}

// Result is Acquire's answer.
type Result struct {
	Outcome      Outcome
	Lock         Lock   // Owned
	AttemptID    string // Owned, Replay: the payment's attempt the key created, if it did
	RefundID     string // Owned, Replay: the refund the key created, if it did
	CaptureID    string // Owned, Replay: the capture or void the key created, if it did
	Created      bool   // Owned: the key (and its attempt or refund) were created by this call
	ResponseCode int    // Replay
	ResponseBody []byte // Replay
	RetryAfter   int    // InUse: whole seconds until the lock expires, at least 1
}

// CreateFunc inserts what a new key creates (an attempt, a refund, or a
// capture or void, whose id it is given) in the key's transaction.
type CreateFunc func(ctx context.Context, tx pgx.Tx, id string) error

// ref names what a key created: a payment's attempt, a refund, a capture
// or void, or a webhook endpoint (exactly one).
type ref struct{ attemptID, refundID, captureID, endpointID string }

func (r ref) id() string { return r.attemptID + r.refundID + r.captureID + r.endpointID }

// Acquire claims (tenantID, key) for a create request with fingerprint fp. A
// new key is inserted together with its attempt (create, given the attempt
// id); an error from create rolls both back and is returned as is.
func Acquire(ctx context.Context, pool *db.Pool, cfg Config, tenantID, key string, fp []byte, newAttemptID string, create CreateFunc) (Result, error) {
	return acquire(ctx, pool, cfg, tenantID, key, fp, ref{attemptID: newAttemptID}, create)
}

// AcquireForRefund is Acquire for a refund request: a new key is inserted
// together with its refund (create, given the refund id). Payments and
// refunds share one key space per tenant; the fingerprint tells them apart.
func AcquireForRefund(ctx context.Context, pool *db.Pool, cfg Config, tenantID, key string, fp []byte, newRefundID string, create CreateFunc) (Result, error) {
	return acquire(ctx, pool, cfg, tenantID, key, fp, ref{refundID: newRefundID}, create)
}

// AcquireForCapture is Acquire for a capture or void request: a new key is
// inserted together with its capture or void (create, given its id).
func AcquireForCapture(ctx context.Context, pool *db.Pool, cfg Config, tenantID, key string, fp []byte, newCaptureID string, create CreateFunc) (Result, error) {
	return acquire(ctx, pool, cfg, tenantID, key, fp, ref{captureID: newCaptureID}, create)
}

func acquire(ctx context.Context, pool *db.Pool, cfg Config, tenantID, key string, fp []byte, newRef ref, create CreateFunc) (Result, error) {
	return acquireWith(ctx, pool, cfg, tenantID, key, fp, func() (Result, bool, error) {
		return insert(ctx, pool, cfg, tenantID, key, fp, newRef, create)
	})
}

// acquireWith answers a request from its key as stored, or inserts a
// missing key with insert (which reports false when someone else inserted
// it first), looking again while racers change the key.
func acquireWith(ctx context.Context, pool *db.Pool, cfg Config, tenantID, key string, fp []byte, insert func() (Result, bool, error)) (Result, error) {
	for range 5 {
		// The read comes first: a replay (the common retry) answers from one
		// SELECT, without a transaction; only a missing key is inserted.
		res, err := existing(ctx, pool, cfg, tenantID, key, fp)
		if errors.Is(err, errMissing) {
			var inserted bool
			res, inserted, err = insert()
			if err != nil || inserted {
				return res, err
			}
			continue // inserted by someone else meanwhile: read it
		}
		if !errors.Is(err, errRace) {
			return res, err
		}
		// The key changed under us (completed or taken over): look again.
	}
	return Result{}, errors.New("idempotency: key kept changing under concurrent use")
}

var (
	errRace    = errors.New("idempotency: raced")
	errMissing = errors.New("idempotency: no such key")
)

func insert(ctx context.Context, pool *db.Pool, cfg Config, tenantID, key string, fp []byte, r ref, create CreateFunc) (Result, bool, error) {
	var res Result
	inserted := false
	err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		token, err := db.Q.IdemKeyInsert(ctx, tx, insertParams(cfg, tenantID, key, fp, r))
		if errors.Is(db.Translate(err), db.ErrNotFound) {
			return nil // someone else owns it
		}
		if err != nil {
			return fmt.Errorf("insert key: %w", err)
		}
		if err := create(ctx, tx, r.id()); err != nil {
			return err
		}
		inserted = true
		res = Result{Outcome: Owned, Lock: lockOf(cfg, tenantID, key, token), AttemptID: r.attemptID, RefundID: r.refundID, CaptureID: r.captureID, Created: true}
		return nil
	})
	if err != nil {
		return Result{}, false, err
	}
	return res, inserted, nil
}

func insertParams(cfg Config, tenantID, key string, fp []byte, r ref) db.IdemKeyInsertParams {
	return db.IdemKeyInsertParams{
		TenantID: tenantID, Key: key, Fingerprint: fp,
		AttemptID: nonEmpty(r.attemptID), RefundID: nonEmpty(r.refundID), CaptureID: nonEmpty(r.captureID),
		EndpointID: nonEmpty(r.endpointID),
		LockTtlMs:  cfg.LockTTL.Milliseconds(), KeyTtlMs: cfg.KeyTTL.Milliseconds(),
	}
}

// existing answers a request from its key as stored: errMissing if there is
// none, errRace if it changed while being taken over.
func existing(ctx context.Context, pool *db.Pool, cfg Config, tenantID, key string, fp []byte) (Result, error) {
	row, err := db.Q.IdemKeyGet(ctx, pool, db.IdemKeyGetParams{TenantID: tenantID, Key: key})
	if err = db.Translate(err); errors.Is(err, db.ErrNotFound) {
		return Result{}, errMissing
	}
	if err != nil {
		return Result{}, fmt.Errorf("read key: %w", err)
	}
	if res, ok := answer(row, fp); ok {
		return res, nil
	}
	lock, ok, err := takeover(ctx, pool, cfg, tenantID, key, row.LockToken)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		return Result{}, errRace
	}
	return Result{Outcome: Owned, Lock: lock, AttemptID: deref(row.AttemptID), RefundID: deref(row.RefundID), CaptureID: deref(row.CaptureID)}, nil
}

// answer is what a stored key answers by itself: a replay, a key in use, or
// a key used for another request. ok is false for a key that is to be taken
// over (unlocked, without a final response).
func answer(row db.IdemKeyGetRow, fp []byte) (res Result, ok bool) {
	if !bytes.Equal(row.Fingerprint, fp) {
		return Result{Outcome: Mismatch}, true
	}
	res = Result{AttemptID: deref(row.AttemptID), RefundID: deref(row.RefundID), CaptureID: deref(row.CaptureID)}
	if row.ResponseCode != nil {
		res.Outcome, res.ResponseCode, res.ResponseBody = Replay, int(*row.ResponseCode), row.ResponseBody
		return res, true
	}
	if row.Locked {
		res.Outcome, res.RetryAfter = InUse, int(row.RetryAfterSeconds)
		return res, true
	}
	return Result{}, false
}

func takeover(ctx context.Context, q db.DBTX, cfg Config, tenantID, key string, seen int64) (Lock, bool, error) {
	token, err := db.Q.IdemKeyTakeover(ctx, q, db.IdemKeyTakeoverParams{
		TenantID: tenantID, Key: key, SeenToken: seen, LockTtlMs: cfg.LockTTL.Milliseconds(),
	})
	if err = db.Translate(err); errors.Is(err, db.ErrNotFound) {
		return Lock{}, false, nil // taken over, completed or deleted meanwhile
	}
	if err != nil {
		return Lock{}, false, fmt.Errorf("take over key: %w", err)
	}
	return lockOf(cfg, tenantID, key, token), true, nil
}

// TakeOverForAttempt claims the key of attemptID the way a retrying request
// would (the reconciler and GET ?sync=true use it), so they never race a live
// request. ok is false when the key is locked by a live owner, already holds
// a final response, or was taken by someone else first.
func TakeOverForAttempt(ctx context.Context, pool *db.Pool, cfg Config, attemptID string) (lock Lock, ok bool, err error) {
	k, err := db.Q.IdemKeyGetByAttempt(ctx, pool, &attemptID)
	return takeOverKey(ctx, pool, cfg, attemptID, k, err)
}

// TakeOverForRefund is TakeOverForAttempt for the key of refundID.
func TakeOverForRefund(ctx context.Context, pool *db.Pool, cfg Config, refundID string) (lock Lock, ok bool, err error) {
	k, err := db.Q.IdemKeyGetByRefund(ctx, pool, &refundID)
	return takeOverKey(ctx, pool, cfg, refundID, db.IdemKeyGetByAttemptRow(k), err)
}

// TakeOverForCapture is TakeOverForAttempt for the key of capture or void id.
func TakeOverForCapture(ctx context.Context, pool *db.Pool, cfg Config, id string) (lock Lock, ok bool, err error) {
	k, err := db.Q.IdemKeyGetByCapture(ctx, pool, &id)
	return takeOverKey(ctx, pool, cfg, id, db.IdemKeyGetByAttemptRow(k), err)
}

// takeOverKey takes over k, the key of id as a lookup read it (or failed to
// find it with lookupErr).
func takeOverKey(ctx context.Context, pool *db.Pool, cfg Config, id string, k db.IdemKeyGetByAttemptRow, lookupErr error) (Lock, bool, error) {
	if err := db.Translate(lookupErr); errors.Is(err, db.ErrNotFound) {
		return Lock{}, false, nil
	} else if err != nil {
		return Lock{}, false, fmt.Errorf("read key of %s: %w", id, err)
	}
	if k.Completed || k.Locked {
		return Lock{}, false, nil
	}
	return takeover(ctx, pool, cfg, k.TenantID, k.Key, k.LockToken)
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
