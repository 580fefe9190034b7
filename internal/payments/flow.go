package payments

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/captures"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/failpoint"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/metrics"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/refunds"
)

// The create path of a payment's charge and of every operation on a
// payment (a refund, a capture, a void) is one flow: hold the key, commit
// PENDING, call the provider with the derived key, and finish in one
// transaction that holds the key again. A kind supplies what differs:
// which table, which provider call, what its answer means, which reply.

// subject is a payment's attempt, or an operation on a payment, as the
// flow sees it.
type subject struct {
	id         string
	status     lifecycle.Status
	provider   string // the provider it is at, "" while none is chosen
	providerID string // the provider's charge or refund id, "" if none is recorded
	// paymentID and chargeID, for an operation: its payment, and the
	// payment's charge at the provider.
	paymentID, chargeID string
	rec                 any // the kind's record: attempts.Attempt, refunds.Refund or captures.Capture
}

// change asks for a transition of a subject.
type change struct {
	id          string
	to          lifecycle.Status
	provider    string // for PENDING: the provider about to be called
	providerID  string // the provider's charge or refund id, when known
	failureCode string // for FAILED
	// What the provider said beyond the status, for the kinds it concerns:
	// a payment's (or capture's) amount captured for SUCCEEDED, a payment's
	// capture_before for AUTHORIZED and canceled_reason for CANCELED;
	// unexpected marks a capture or void the provider made without one of
	// ours (an anomaly); seen is what a refused capture or void showed of
	// the payment's charge.
	captured       int64
	captureBefore  *time.Time
	canceledReason string
	unexpected     bool
	seen           *attempts.Change
	source         lifecycle.Source
	reason         string
}

// Origin is who asks for a change: the source its audit rows record (api
// when empty: the tenant API; an operator's console passes its own) and,
// when set, who it is (an operator's email), which their reasons name.
type Origin struct {
	Source lifecycle.Source
	Actor  string
}

func (o Origin) source() lifecycle.Source {
	if o.Source == "" {
		return lifecycle.SourceAPI
	}
	return o.Source
}

// says is an audit reason given on o's behalf.
func (o Origin) says(reason string) string { return lifecycle.ByOperator(reason, o.Actor) }

// kind is what differs between driving a payment's charge and an operation.
type kind interface {
	// name is "payment", "refund", "capture" or "void", for logs.
	name() string
	// load reads the subject.
	load(ctx context.Context, q db.DBTX, id string) (subject, error)
	// touch records that the provider is about to be called again.
	touch(ctx context.Context, q db.DBTX, id string) error
	// move applies c if it is an edge from the subject's current status,
	// under its row lock, and returns the subject as it is afterwards.
	move(ctx context.Context, tx db.DBTX, c change) (subject, bool, error)
	// conflict records that c contradicts the final subject s.
	conflict(ctx context.Context, tx db.DBTX, s subject, c change) error
	// reply is the answer for the subject as it is.
	reply(s subject) (Reply, error)
	// candidates are the providers a call of s may go to, in order: a
	// payment that never reached a provider (CREATED) may go along its
	// route; anything else is pinned to the provider it is at.
	candidates(s subject) []string
	// call asks provider p to charge, refund, capture or void (with the
	// derived key).
	call(ctx context.Context, s subject, p Provider) provider.Result
	// answered is the change a Succeeded or Declined call r calls for (its
	// status and what else the provider said); it may ask p more (a refused
	// capture reads the charge back).
	answered(ctx context.Context, s subject, p Provider, r provider.Result) change
	// lookup asks the provider what it holds under the derived key and
	// returns the change that calls for (its status and what else it
	// said); provider.ErrNotFound if nothing.
	lookup(ctx context.Context, s subject) (change, error)
	// quietFor reports whether the subject has not changed for d.
	quietFor(ctx context.Context, q db.DBTX, id string, d time.Duration) (bool, error)
	// takeOver takes the subject's key over like a retrying request.
	takeOver(ctx context.Context, id string) (idempotency.Lock, bool, error)
	// failpoints are the kind's crash points.
	failpoints() failpoints
	// counted counts a committed transition.
	counted(to lifecycle.Status, src lifecycle.Source)
}

// failpoints name a kind's crash points (docs/configuration.md).
type failpoints struct{ afterKey, afterCall, beforeCommit string }

// keyAnswer answers a request whose key is not (or no longer) its own to
// drive: a replay, a key in use, or a key used for another request. ok is
// false when the request owns the key.
func keyAnswer(res idempotency.Result, subjectID string) (reply Reply, ok bool, err error) {
	switch res.Outcome {
	case idempotency.Replay:
		metrics.IdempotencyOutcomes.WithLabelValues("replayed").Inc()
		return Reply{Code: res.ResponseCode, Body: res.ResponseBody, Replayed: true, PaymentID: subjectID}, true, nil
	case idempotency.InUse:
		metrics.IdempotencyOutcomes.WithLabelValues("in_use").Inc()
		e := apperr.New(apperr.IdempotencyKeyInUse, "a request with this Idempotency-Key is in progress; retry later")
		e.RetryAfter = res.RetryAfter
		return Reply{}, true, e
	case idempotency.Mismatch:
		metrics.IdempotencyOutcomes.WithLabelValues("reused_mismatch").Inc()
		return Reply{}, true, apperr.New(apperr.IdempotencyKeyReused, "this Idempotency-Key was used for a different request")
	}
	if res.Created {
		metrics.IdempotencyOutcomes.WithLabelValues("created").Inc()
	} else {
		metrics.IdempotencyOutcomes.WithLabelValues("resumed").Inc()
	}
	return Reply{}, false, nil
}

// drive continues subject sub from its status while holding the key's lock.
//
// A subject goes to the first of its candidates whose breaker is not open;
// a candidate that is not configured is skipped (configured).
// It moves on to the next only when the call was not sent (no connection
// obtained for any try): the provider is committed with PENDING before each
// call, and a call that was not sent takes it back to CREATED (not_sent)
// first, so the audit trail shows every hop. Anything else pins it to that
// provider for good. All of it within one retry budget.
//
// pre, if not nil, is sub as this request already committed it in PENDING
// at its first candidate, with the lock renewed (the create path's fast
// acquisition): that call is not marked again, and it finishes in one round
// trip if it can.
func (s *Service) drive(ctx context.Context, k kind, lock idempotency.Lock, sub subject, pre *subject, o Origin) (Reply, error) {
	// From here on, work that may have charged (or refunded) must finish
	// even if the client hangs up.
	ctx = context.WithoutCancel(ctx)
	if sub.status.Answered() {
		return s.finish(ctx, k, lock, change{id: sub.id, to: sub.status, source: o.source()})
	}
	// One retry budget for every call of the request, from the first one
	// (waits for the database before it do not count).
	var callCtx context.Context
	for _, p := range s.configured(k, sub) {
		name := p.Name()
		var pending subject // committed PENDING at name by the fast path
		fast := premarkedAt(pre, name)
		if fast {
			pending = *pre
		}
		pre = nil // only ever the first call
		// Already PENDING here, a call the breaker refuses is not sent,
		// and goes back to CREATED like any other.
		if p.BreakerOpen() && !fast {
			continue // refused before anything is sent: the next one
		}
		committedPending := true
		var err error
		if !fast {
			committedPending, err = s.markCalling(ctx, k, lock, sub, name, o)
		}
		if err != nil {
			if errors.Is(err, errLostLock) {
				// Another owner (or the reconciler, which failed it as
				// abandoned) took the key while we stalled: call nothing.
				return s.current(ctx, k, sub.id)
			}
			return Reply{}, err
		}
		if callCtx == nil {
			var cancel context.CancelFunc
			callCtx, cancel = context.WithTimeout(ctx, s.cfg.RetryBudget+s.cfg.CallTimeout)
			defer cancel()
		}
		var r provider.Result
		if pastKeyWindow(p, sub) {
			// The provider may have forgotten our key: a POST now could
			// make the step again. Only reads (sync, the reconciler) decide.
			r = provider.Result{Outcome: provider.Unknown, Err: errPastKeyWindow}
		} else {
			r = k.call(callCtx, sub, p)
		}
		if r.Outcome == provider.Declined && r.Rejected && !committedPending {
			// The provider refused this request and holds nothing of
			// ours, but an earlier request sent this step and may have
			// had another answer: only reads (sync, the reconciler) decide.
			r = provider.Result{Outcome: provider.Unknown, Tries: r.Tries, Err: errRejectedOnResume}
		}
		var c change
		switch r.Outcome {
		case provider.Succeeded, provider.Declined:
			if r.Outcome == provider.Succeeded {
				failpoint.Hit(k.failpoints().afterCall)
			}
			c = k.answered(callCtx, sub, p, r)
			c.reason = "provider " + name + " " + answerVerb(r.Outcome, c.to)
		case provider.NotSent:
			if !committedPending {
				// Pinned here by an earlier request whose call may have
				// reached the provider: it stays as it is.
				return s.unavailable(ctx, lock)
			}
			s.log.Warn("provider call not sent; trying the next provider", k.name()+"_id", sub.id, "provider", name, "err", r.Err)
			back, err := s.returnNotSent(ctx, k, lock, sub.id, o)
			if err != nil {
				if errors.Is(err, errLostLock) {
					return s.current(ctx, k, sub.id) // sub.id: back is empty on an error
				}
				return Reply{}, err
			}
			if back.status != lifecycle.Created {
				// Moved on meanwhile (a webhook made it final): it stays
				// as it is, and the key ends as finish ends it for it.
				return s.finish(ctx, k, lock, change{id: back.id, to: back.status, source: o.source()})
			}
			sub = back
			continue
		default:
			s.log.Warn("provider outcome unknown", k.name()+"_id", sub.id, "provider", name, "tries", r.Tries, "err", r.Err)
			c.to, c.reason = lifecycle.Unknown, unknownReason(r.Err)
			if r.Anomaly != "" {
				s.connectorAnomaly(ctx, k, sub, name, r, o)
			}
		}
		c.id, c.source, c.reason = sub.id, o.source(), o.says(c.reason)
		if fast { // only payments take the fast path (createFast)
			if reply, done, err := k.(charges).finishFast(ctx, lock, pending, c); done {
				return reply, err
			}
		}
		return s.finish(ctx, k, lock, c)
	}
	// No provider could be reached: nothing was sent anywhere.
	return s.unavailable(ctx, lock)
}

// configured is sub's candidates that are configured, in order. A name
// that is not (removed from PROVIDERS after a rule, the route or the
// subject named it) is skipped, with one warning for the request: the
// subject never goes to a provider outside its candidates, so with none
// left it is answered like one whose providers all refused the connection
// (drive's 503, the key released, the subject as it was).
func (s *Service) configured(k kind, sub subject) []Provider {
	names := k.candidates(sub)
	out := make([]Provider, 0, len(names))
	var skipped []string
	for _, name := range names {
		if p, ok := s.providers[name]; ok {
			out = append(out, p)
		} else {
			skipped = append(skipped, name)
		}
	}
	if len(skipped) > 0 {
		s.log.Warn("skipping providers that are not configured (PROVIDERS)", k.name()+"_id", sub.id,
			"status", sub.status, "skipped", skipped, "left", len(out))
	}
	return out
}

// answerVerb is what the audit reason says the provider did.
func answerVerb(o provider.Outcome, to lifecycle.Status) string {
	switch {
	case to == lifecycle.Authorized:
		return "authorized"
	case o == provider.Succeeded:
		return "succeeded"
	}
	return "declined"
}

// errRejectedOnResume is why a resumed step the provider rejected is not FAILED.
var errRejectedOnResume = errors.New("provider rejected the request, but an earlier request may have sent this step: only read back")

// errPastKeyWindow is why a step past its provider's key window is not sent again.
var errPastKeyWindow = errors.New("not sent again: past the provider's idempotency key window, only read back")

// pastKeyWindow reports whether sub may have been sent to p already and was
// created longer ago than p's key window (0: forever): its POST must not be
// repeated. The subject's creation is a lower bound of its first sending,
// so the rule errs on the side of not sending.
func pastKeyWindow(p Provider, sub subject) bool {
	kw, ok := p.(interface{ KeyWindow() time.Duration })
	if !ok || kw.KeyWindow() <= 0 || sub.status == lifecycle.Created {
		return false
	}
	var created time.Time
	switch rec := sub.rec.(type) {
	case attempts.Attempt:
		created = rec.CreatedAt
	case refunds.Refund:
		created = rec.CreatedAt
	case captures.Capture:
		created = rec.CreatedAt
	default:
		return false
	}
	return time.Since(created) > kw.KeyWindow()
}

// connectorAnomaly records what the connector flagged on a call whose
// outcome is unknown (e.g. idempotency_error: the provider saw our key with
// other parameters), once per subject and kind. Best effort: the subject
// becomes UNKNOWN whatever happens here, and the reconciler resolves it.
func (s *Service) connectorAnomaly(ctx context.Context, k kind, sub subject, providerName string, r provider.Result, o Origin) {
	payment := sub.paymentID
	if payment == "" {
		payment = sub.id
	}
	err := attempts.RecordAnomaly(ctx, s.pool, attempts.Anomaly{
		Kind: r.Anomaly, AttemptID: payment, ChargeID: sub.chargeID, Source: o.source(),
		Detail:    map[string]any{k.name() + "_id": sub.id, "provider": providerName, "error": fmt.Sprint(r.Err)},
		DedupeKey: r.Anomaly + ":" + sub.id,
	})
	if err != nil {
		s.log.Error("recording a provider anomaly failed", k.name()+"_id", sub.id, "anomaly", r.Anomaly, "err", err)
	}
}

func unknownReason(err error) string {
	if err == nil {
		return "provider outcome unknown"
	}
	return "provider outcome unknown: " + err.Error()
}

// markCalling commits PENDING before the first provider call, or records a
// resumed call on a subject that is already PENDING or UNKNOWN, only while
// lock still holds, so a stalled owner whose key was taken over calls
// nothing. In the same transaction it renews the lock for a whole lock TTL
// from the moment it commits, so that however long this request waited for
// the database (a pool connection, a row lock), the lock outlives the
// provider call that starts now. committedPending reports whether this call
// moved the subject from CREATED to PENDING.
func (s *Service) markCalling(ctx context.Context, k kind, lock idempotency.Lock, sub subject, providerName string, o Origin) (committedPending bool, err error) {
	err = s.underLock(ctx, lock, func(tx pgx.Tx) error {
		if sub.status != lifecycle.Created {
			if err := k.touch(ctx, tx, sub.id); err != nil {
				return err
			}
		} else {
			now, ok, err := k.move(ctx, tx, change{
				id: sub.id, to: lifecycle.Pending, provider: providerName,
				source: o.source(), reason: o.says(lifecycle.ReasonCalling + providerName),
			})
			if err != nil {
				return err
			}
			if !ok && now.status != lifecycle.Pending {
				return errLostLock // moved on without us: never call the provider for it
			}
			committedPending = ok
		}
		// Last, so that the clock it reads is as late as the commit allows.
		held, err := idempotency.Renew(ctx, tx, lock, s.cfg.LockTTL)
		if err == nil && !held {
			err = errLostLock
		}
		return err
	})
	if err != nil {
		return false, err
	}
	if committedPending {
		k.counted(lifecycle.Pending, o.source())
	}
	return committedPending, nil
}

// returnNotSent takes a subject this request moved to PENDING back to
// CREATED (not_sent) once its call provably never reached the provider, so
// that it may go to another provider, or stay CREATED if none is left. The
// key stays held. A subject that is no longer PENDING (a webhook moved it
// during the call) is left as it is and returned as it is.
func (s *Service) returnNotSent(ctx context.Context, k kind, lock idempotency.Lock, id string, o Origin) (subject, error) {
	var (
		sub   subject
		moved bool
	)
	err := s.underLock(ctx, lock, func(tx pgx.Tx) error {
		var err error
		sub, moved, err = k.move(ctx, tx, change{
			id: id, to: lifecycle.Created, source: o.source(),
			reason: lifecycle.ReasonNotSent,
		})
		return err
	})
	if err != nil {
		return subject{}, err
	}
	if moved {
		k.counted(lifecycle.Created, o.source())
	}
	return sub, nil
}

// unavailable releases the key without a response and answers 503.
func (s *Service) unavailable(ctx context.Context, lock idempotency.Lock) (Reply, error) {
	if _, err := idempotency.Release(ctx, s.pool, lock); err != nil {
		return Reply{}, err
	}
	return Reply{}, s.unavailableError()
}

// unavailableError is the 503 of a request that reached no provider.
func (s *Service) unavailableError() error {
	e := apperr.New(apperr.ProviderUnavailable, "the payment provider is unavailable; nothing was sent to it by this request; retry with the same Idempotency-Key")
	e.RetryAfter = int(math.Max(1, math.Ceil(s.cfg.BreakerCooldown.Seconds())))
	return e
}

var errLostLock = errors.New("idempotency lock lost")

// underLock runs fn in a transaction that first holds the key row under
// lock, so nothing fn writes commits unless this request still owns the key;
// errLostLock if it does not.
func (s *Service) underLock(ctx context.Context, lock idempotency.Lock, fn func(tx pgx.Tx) error) error {
	return db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		held, err := idempotency.Hold(ctx, tx, lock)
		if err != nil {
			return err
		}
		if !held {
			return errLostLock
		}
		return fn(tx)
	})
}

// finish applies c and ends the key's ownership in one transaction, only
// while lock still holds: a final status stores the key's response; an
// unresolved one unlocks the key so that a retry resumes it. Whatever the
// transition finds (a webhook may have resolved the subject first), the
// answer is the subject's status as committed.
func (s *Service) finish(ctx context.Context, k kind, lock idempotency.Lock, c change) (Reply, error) {
	var (
		reply   Reply
		applied bool
	)
	err := s.underLock(ctx, lock, func(tx pgx.Tx) error {
		sub, ok, err := k.move(ctx, tx, c)
		applied = ok
		if err != nil {
			return err
		}
		if !applied && c.to.Final() && conflicts(sub, c) {
			if err := k.conflict(ctx, tx, sub, c); err != nil {
				return err
			}
		}
		reply, err = finishKey(ctx, tx, k, lock, sub)
		if err != nil {
			return err
		}
		failpoint.Hit(k.failpoints().beforeCommit)
		return nil
	})
	if errors.Is(err, errLostLock) {
		// Another owner took the key over; it will store the response.
		// Answer what is committed, without storing anything.
		s.log.Warn("idempotency lock lost before completion", k.name()+"_id", c.id)
		return s.current(ctx, k, c.id)
	}
	if err == nil && applied {
		k.counted(c.to, c.source)
	}
	return reply, err
}

// finishKey ends a key's ownership in tx according to the subject's status:
// a status that answers the request for good (a final one, or AUTHORIZED)
// stores the response; otherwise the key is released so that it can be
// resumed. The caller holds the key row (idempotency.Hold).
func finishKey(ctx context.Context, tx db.DBTX, k kind, lock idempotency.Lock, sub subject) (Reply, error) {
	reply, err := k.reply(sub)
	if err != nil {
		return Reply{}, err
	}
	if sub.status.Answered() {
		_, err = idempotency.Complete(ctx, tx, lock, reply.Code, reply.Body)
	} else {
		_, err = idempotency.Release(ctx, tx, lock)
	}
	return reply, err
}

// current answers the subject as committed, storing nothing.
func (s *Service) current(ctx context.Context, k kind, id string) (Reply, error) {
	sub, err := k.load(ctx, s.pool, id)
	if err != nil {
		return Reply{}, err
	}
	return k.reply(sub)
}

// conflicts reports whether a report c contradicts the final subject sub.
func conflicts(sub subject, c change) bool {
	if sub.status != c.to {
		return true
	}
	return c.providerID != "" && sub.providerID != "" && sub.providerID != c.providerID
}

// conflictDetail describes a conflicting report for its anomaly.
func conflictDetail(sub subject, c change) (map[string]any, string) {
	return map[string]any{"status": sub.status, "reported": c.to, "reason": c.reason},
		fmt.Sprintf("conflict:%s:%s:%s:%s", c.source, sub.id, c.to, c.providerID)
}
