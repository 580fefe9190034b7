package payments

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/failpoint"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/metrics"
	"github.com/acme/paymentsvc/internal/routing"
)

// The create path of a new payment in three round trips, each a whole
// transaction sent at once (db.Pipeline), plus the provider call:
//
//  0. a completed key this pod has read before answers from its replay
//     cache (idempotency.ReplayCache), with no SQL at all;
//  1. read the key and the tenant's routing rules (no transaction): a
//     stored response replays from here (and is kept in the cache);
//  2. insert the key, locked to this request, and its attempt directly in
//     PENDING at the first provider of its route, with the audit rows
//     CREATED and PENDING: one commit, before the call;
//  3. after the call, move the attempt, only while the key is still this
//     request's (the update checks the lock token), with its audit row,
//     its event, and the key's response or release, each conditional on
//     the move having happened in this transaction.
//
// Whatever the fast path cannot decide alone, it leaves to the general path
// (Acquire, markCalling, finish), having written nothing: a key to take
// over, an order already paid, a first provider whose breaker is open or
// that is not configured (drive skips it), a webhook that moved the attempt
// during the call, a lost lock, an armed failpoint of the general path.

// createFast runs steps 1 and 2 and drives the payment; done is false when
// the request is the general path's.
func (s *Service) createFast(ctx context.Context, in CreateInput) (reply Reply, done bool, err error) {
	// A completed key this pod has seen answers from memory, before any SQL.
	var sum *idempotency.BodySum
	if in.BodySum != (idempotency.BodySum{}) {
		sum = &in.BodySum
	}
	if res, ok := s.replays.Answer(in.TenantID, in.IdempotencyKey, in.Fingerprint, sum); ok {
		reply, _, err := keyAnswer(res, res.AttemptID)
		return reply, true, err
	}
	var read db.Pipeline
	peek := idempotency.QueueGet(&read, in.TenantID, in.IdempotencyKey)
	rules := routing.QueueGet(&read, in.TenantID)
	sent := time.Now()
	if err := read.Send(ctx, s.pool); err != nil {
		return Reply{}, true, err
	}
	s.replays.Remember(peek, sent)
	if res, ok := peek.Answer(in.Fingerprint); ok {
		reply, _, err := keyAnswer(res, res.AttemptID)
		return reply, true, err
	}
	if !peek.Missing() || failpoint.Armed(failpoint.AfterKeyAcquired) || in.Origin.source() != lifecycle.SourceAPI {
		return Reply{}, false, nil // its audit rows name the api
	}
	route := routing.Route(rules.Rules, in.Currency, s.ProviderNames())
	first, err := s.Provider(route[0])
	if err != nil || first.BreakerOpen() {
		return Reply{}, false, nil
	}

	n := in.attempt(attempts.NewID(), route)
	var acquire db.Pipeline
	key := idempotency.QueueInsert(&acquire, s.cfg.keys(), in.TenantID, in.IdempotencyKey, in.Fingerprint, n.ID)
	created := attempts.QueueInsertCalling(&acquire, n, first.Name())
	renewed := idempotency.QueueRenewNew(&acquire, s.cfg.keys(), in.TenantID, in.IdempotencyKey, n.ID)
	if err := acquire.Send(ctx, s.pool); err != nil {
		// The order guard (409), or a commit whose outcome is unknown: the
		// general path answers from the key as it is (a key committed by
		// this very batch is locked: 409 with Retry-After; none: a normal
		// run; the database still down: 503).
		if !errors.Is(err, db.ErrConflict) {
			s.log.Warn("create: acquisition batch failed; taking the general path", "err", err)
		}
		return Reply{}, false, nil
	}
	if !key.OK {
		return Reply{}, false, nil // inserted by another request meanwhile
	}
	if !created.OK || !renewed.OK {
		return Reply{}, true, fmt.Errorf("attempt %s of a new key was not inserted", n.ID)
	}
	metrics.IdempotencyOutcomes.WithLabelValues("created").Inc()
	k := charges{s}
	k.counted(attempts.Created, attempts.SourceAPI)
	k.counted(attempts.Pending, attempts.SourceAPI)

	// The route is chosen as for a CREATED payment: should the first
	// provider not be reached at all, the general path takes it back to
	// CREATED and on to the next.
	pending := paymentSubject(created.Attempt)
	unsent := created.Attempt
	unsent.Status, unsent.Provider = attempts.Created, nil
	fresh := paymentSubject(unsent)
	reply, err = s.drive(ctx, k, key.Lock, fresh, &pending, in.Origin)
	return reply, true, err
}

// finishFast is step 3; done is false when it moved nothing (and wrote
// nothing), for finish to decide.
func (k charges) finishFast(ctx context.Context, lock idempotency.Lock, pending subject, c change) (reply Reply, done bool, err error) {
	if failpoint.Armed(failpoint.BeforeCompleteCommit) || c.to == lifecycle.Canceled || c.unexpected {
		// A create answered CANCELED, or captured without a capture of
		// ours, is rare and records more than this one round trip writes.
		return Reply{}, false, nil
	}
	a := pending.rec.(attempts.Attempt)
	ac := paymentChange(c)
	ac.ID = a.ID
	var p db.Pipeline
	moved, err := attempts.QueueFinish(ctx, &p, a, ac, lock.TenantID, lock.Key, lock.Token)
	if err != nil {
		return Reply{}, true, err
	}
	var key *idempotency.Completed
	if c.to.Answered() {
		body, err := attempts.StampedPayment(a, ac, false)
		if err != nil {
			return Reply{}, true, err
		}
		key = idempotency.QueueCompleteMoved(&p, lock, a.ID, string(c.to), StatusCode(c.to), body)
	} else {
		key = idempotency.QueueReleaseMoved(&p, lock, a.ID, string(c.to))
	}
	if err := p.Send(ctx, k.s.pool); err != nil {
		// It may have committed or not: finish decides from what is
		// committed, under the key (a stored response: it answers the
		// payment as committed; none: it applies c, or nothing if c is
		// there already, and finishes the key).
		k.s.log.Warn("finish batch failed; finishing on the general path", "payment_id", a.ID, "err", err)
		return Reply{}, false, nil
	}
	if !moved.OK {
		return Reply{}, false, nil
	}
	if moved.Event {
		k.s.wakeup.Signal()
	}
	if !key.OK {
		// The move held the key row with the same token, so this is not
		// expected; finish completes the key from the committed move.
		k.s.log.Warn("payment moved but its key was not finished; finishing on the general path", "payment_id", a.ID, "to", c.to)
		return Reply{}, false, nil
	}
	k.counted(c.to, c.source)
	reply, err = replyFor(moved.Attempt)
	if c.to.Answered() {
		reply.Body = key.Body // what a replay answers, byte for byte
	}
	return reply, true, err
}

// A subject committed PENDING by the fast path is at its first candidate.
func premarkedAt(pre *subject, name string) bool {
	return pre != nil && pre.status == lifecycle.Pending && pre.provider == name
}
