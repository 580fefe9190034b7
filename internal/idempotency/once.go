package idempotency

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/db"
)

// DoFunc makes what a new key creates (given its id) in the key's
// transaction and returns the final answer, which is stored with the key in
// that same transaction.
type DoFunc func(ctx context.Context, tx pgx.Tx, id string) (code int, body []byte, err error)

// OnceForEndpoint is Acquire for a create whose every effect is in the
// database (a merchant's webhook endpoint): there is nothing to resume, so
// one transaction inserts the key, creates the endpoint (do, given
// newEndpointID) and stores the answer, and the key is never seen in
// progress. The result is Owned (do ran: its answer is in ResponseCode and
// ResponseBody), Replay, or Mismatch (the key names another request, a
// payment's or a refund's included: the one key space of the tenant). A
// request racing another with the same key waits at the key's insert for
// the other's commit, then replays it.
func OnceForEndpoint(ctx context.Context, pool *db.Pool, cfg Config, tenantID, key string, fp []byte, newEndpointID string, do DoFunc) (Result, error) {
	res, err := acquireWith(ctx, pool, cfg, tenantID, key, fp, func() (Result, bool, error) {
		return insertCompleted(ctx, pool, cfg, tenantID, key, fp, newEndpointID, do)
	})
	if err == nil && res.Outcome == Owned && !res.Created {
		// existing takes over only a key stored without an answer, and keys
		// of this fingerprint are stored with theirs.
		return Result{}, fmt.Errorf("idempotency: key %q of an endpoint has no stored answer", key)
	}
	return res, err
}

func insertCompleted(ctx context.Context, pool *db.Pool, cfg Config, tenantID, key string, fp []byte, id string, do DoFunc) (Result, bool, error) {
	var res Result
	inserted := false
	err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		token, err := db.Q.IdemKeyInsert(ctx, tx, insertParams(cfg, tenantID, key, fp, ref{endpointID: id}))
		if errors.Is(db.Translate(err), db.ErrNotFound) {
			return nil // someone else owns it
		}
		if err != nil {
			return fmt.Errorf("insert key: %w", err)
		}
		code, body, err := do(ctx, tx, id)
		if err != nil {
			return err
		}
		l := lockOf(cfg, tenantID, key, token)
		ok, err := Complete(ctx, tx, l, code, body)
		if err != nil {
			return fmt.Errorf("store the answer of key %q: %w", key, err)
		}
		if !ok { // the transaction inserted it: nobody else can have changed it
			return fmt.Errorf("store the answer of key %q: the key changed under its own transaction", key)
		}
		inserted = true
		res = Result{Outcome: Owned, Lock: l, Created: true, ResponseCode: code, ResponseBody: body}
		return nil
	})
	if err != nil {
		return Result{}, false, err
	}
	return res, inserted, nil
}
