package idempotency

import (
	"context"
	"errors"

	"github.com/acme/paymentsvc/internal/db"
)

// The create path's statements on keys for transactions sent in one round
// trip (db.Pipeline). Each leaves the key as it was when its condition does
// not hold, and the caller then takes Acquire's or Hold's path.

// Peek is a key read ahead of any transaction, valid once its pipeline is
// sent.
type Peek struct {
	found bool
	row   db.IdemKeyGetRow
}

// QueueGet queues the read of (tenantID, key).
func QueueGet(p *db.Pipeline, tenantID, key string) *Peek {
	pk := &Peek{}
	p.Add(func(ctx context.Context, q db.DBTX) error {
		row, err := db.Q.IdemKeyGet(ctx, q, db.IdemKeyGetParams{TenantID: tenantID, Key: key})
		if err = db.Translate(err); errors.Is(err, db.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		pk.found, pk.row = true, row
		return nil
	})
	return pk
}

// Missing reports whether there was no such key.
func (pk *Peek) Missing() bool { return !pk.found }

// Answer is what the key answers a request with fingerprint fp by itself (a
// replay, a key in use, or a key used for another request); ok is false when
// the key is missing or is to be taken over (Acquire).
func (pk *Peek) Answer(fp []byte) (Result, bool) {
	if !pk.found {
		return Result{}, false
	}
	return answer(pk.row, fp)
}

// Inserted is a key a pipeline inserts, valid once it is sent.
type Inserted struct {
	Lock Lock
	OK   bool // false: the key existed (nothing was inserted)
}

// QueueInsert queues the insert of a new key for attempt attemptID, locked
// to the caller: Acquire's insert, whose attempt the caller queues after it
// in the same pipeline.
func QueueInsert(p *db.Pipeline, cfg Config, tenantID, key string, fp []byte, attemptID string) *Inserted {
	in := &Inserted{}
	arg := insertParams(cfg, tenantID, key, fp, ref{attemptID: attemptID})
	p.Add(func(ctx context.Context, q db.DBTX) error {
		token, err := db.Q.IdemKeyInsert(ctx, q, arg)
		if err = db.Translate(err); errors.Is(err, db.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		in.Lock, in.OK = lockOf(cfg, tenantID, key, token), true
		return nil
	})
	return in
}

// QueueRenewNew queues, last in the pipeline that inserts the key of
// attemptID, the renewal of its lock for cfg.LockTTL from the moment the
// statement runs (the database's clock), as markCalling's Renew does before
// a call. Completed.OK reports that the key was renewed.
func QueueRenewNew(p *db.Pipeline, cfg Config, tenantID, key, attemptID string) *Completed {
	c := &Completed{}
	arg := db.IdemKeyRenewNewParams{TenantID: tenantID, Key: key, AttemptID: attemptID, LockTtlMs: cfg.LockTTL.Milliseconds()}
	p.Add(func(ctx context.Context, q db.DBTX) error {
		n, err := db.Q.IdemKeyRenewNew(ctx, q, arg)
		c.OK = n == 1
		return err
	})
	return c
}

// Completed is a queued completion, valid once its pipeline is sent.
type Completed struct {
	Body []byte // the response stored
	OK   bool
}

// QueueCompleteMoved queues Complete of l with the response code and body
// (stamped with the time the transaction moves the attempt at), only if the
// same transaction moved attempt attemptID into status; the key's expiry
// counts from then, as Complete's.
func QueueCompleteMoved(p *db.Pipeline, l Lock, attemptID, status string, code int, body db.Stamped) *Completed {
	c := &Completed{}
	arg := db.IdemKeyCompleteMovedParams{
		ResponseCode: int32(code), BodyHead: body.Head, BodyTail: body.Tail, KeyTtlMs: l.keyTTLms(),
		TenantID: l.TenantID, Key: l.Key, LockToken: l.Token, AttemptID: attemptID, Status: status,
	}
	p.Add(func(ctx context.Context, q db.DBTX) error {
		b, err := db.Q.IdemKeyCompleteMoved(ctx, q, arg)
		if err = db.Translate(err); errors.Is(err, db.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		c.Body, c.OK = b, true
		return nil
	})
	return c
}

// QueueReleaseMoved queues Release of l, only if the same transaction moved
// attempt attemptID into status.
func QueueReleaseMoved(p *db.Pipeline, l Lock, attemptID, status string) *Completed {
	c := &Completed{}
	arg := db.IdemKeyReleaseMovedParams{KeyTtlMs: l.keyTTLms(), TenantID: l.TenantID, Key: l.Key, LockToken: l.Token, AttemptID: attemptID, Status: status}
	p.Add(func(ctx context.Context, q db.DBTX) error {
		n, err := db.Q.IdemKeyReleaseMoved(ctx, q, arg)
		c.OK = n == 1
		return err
	})
	return c
}
