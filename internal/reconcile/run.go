package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/captures"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/refunds"
	"github.com/acme/paymentsvc/internal/tracing"
)

// Summary is what one Run did, printed as the job's JSON line. Every checked
// attempt is counted in exactly one of Succeeded, Failed, Authorized and
// StillUnknown; NeedsReview and Errors count some of the StillUnknown ones
// again. The top level counts payments, Refunds, Captures and Voids the
// operations on them; NeedsReview and Errors count all of them, and the
// expiry check of AUTHORIZED payments.
type Summary struct {
	// Checked is the attempts this run claimed and examined.
	Checked int `json:"checked"`
	// Succeeded and Failed are the checked attempts that were SUCCEEDED,
	// or FAILED or CANCELED (no money moved), when their check ended
	// (FAILED includes CREATED attempts failed as abandoned).
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	// StillUnknown is the checked attempts left unresolved: the provider had
	// no final answer yet, could not be asked, or the key was busy.
	StillUnknown int `json:"still_unknown"`
	// NeedsReview is the attempts this run flagged needs_review because
	// their check schedule is spent.
	NeedsReview int `json:"needs_review"`
	// Errors is the checks that failed on a provider or database error.
	Errors int `json:"errors"`
	// Refunds, Captures and Voids count the operations checked, like the
	// top level the payments.
	Refunds  OperationSummary `json:"refunds"`
	Captures OperationSummary `json:"captures"`
	Voids    OperationSummary `json:"voids"`
	// Expired is the AUTHORIZED payments past their capture_before that
	// this run made CANCELED (expired), as the provider said.
	Expired int `json:"expired"`
	// Authorized is the unresolved manual payments that the provider said
	// are authorized (now AUTHORIZED).
	Authorized int `json:"authorized"`

	// expired counts, in one check's summary, an authorization it found
	// expired.
	expired int
}

// OperationSummary is what one Run did to refunds, captures or voids.
type OperationSummary struct {
	Checked      int `json:"checked"`
	Succeeded    int `json:"succeeded"`
	Failed       int `json:"failed"`
	StillUnknown int `json:"still_unknown"`
}

// RefundSummary is OperationSummary, by its former name.
type RefundSummary = OperationSummary

func (s *Summary) add(o Summary) {
	s.Checked += o.Checked
	s.Succeeded += o.Succeeded
	s.Failed += o.Failed
	s.StillUnknown += o.StillUnknown
	s.NeedsReview += o.NeedsReview
	s.Errors += o.Errors
	s.Authorized += o.Authorized
	s.expired += o.expired
}

// target is what Run resolves: payments, each kind of operation on them
// (refunds, captures, voids), and the AUTHORIZED payments past their
// capture_before. All go through the same claim, lease, check and schedule.
type target struct {
	name     string
	claim    func(ctx context.Context, q db.DBTX, minAge time.Duration, max int, lease time.Duration) ([]lifecycle.Claim, error)
	release  func(ctx context.Context, q db.DBTX, ids []string, delay time.Duration) error
	schedule func(ctx context.Context, q db.DBTX, id string, checks int, delay time.Duration, review bool) (bool, error)
	// sync resolves one like payments.Service.Sync, and says how it ended
	// (and why: a failure code, or a CANCELED payment's reason).
	sync func(ctx context.Context, id string, opt payments.SyncOptions) (status lifecycle.Status, why *string, outcome payments.SyncOutcome, err error)
	// tally adds what the target's checks found to the run's summary.
	tally func(sum *Summary, got Summary)
}

func (r *Reconciler) targets() []target {
	paymentSync := func(sync func(context.Context, string, payments.SyncOptions) (attempts.Attempt, payments.SyncOutcome, error)) func(context.Context, string, payments.SyncOptions) (lifecycle.Status, *string, payments.SyncOutcome, error) {
		return func(ctx context.Context, id string, opt payments.SyncOptions) (lifecycle.Status, *string, payments.SyncOutcome, error) {
			a, outcome, err := sync(ctx, id, opt)
			why := a.FailureCode
			if a.Status == attempts.Canceled {
				why = a.CanceledReason
			}
			return a.Status, why, outcome, err
		}
	}
	return []target{
		{
			name: "payment", claim: attempts.ClaimDue, release: attempts.ReleaseClaims, schedule: attempts.ScheduleNextCheck,
			tally: (*Summary).add, sync: paymentSync(r.svc.Sync),
		},
		operationTarget("refund", refunds.ClaimDue, refunds.ReleaseClaims, refunds.ScheduleNextCheck,
			func(s *Summary) *OperationSummary { return &s.Refunds },
			func(ctx context.Context, id string, opt payments.SyncOptions) (lifecycle.Status, *string, payments.SyncOutcome, error) {
				rf, outcome, err := r.svc.SyncRefund(ctx, id, opt)
				return rf.Status, rf.FailureCode, outcome, err
			}),
		r.holdTarget(captures.KindCapture, func(s *Summary) *OperationSummary { return &s.Captures }),
		r.holdTarget(captures.KindVoid, func(s *Summary) *OperationSummary { return &s.Voids }),
		{
			// Whatever --min-age: a deadline that passed is due at once.
			name: "authorization",
			claim: func(ctx context.Context, q db.DBTX, _ time.Duration, max int, lease time.Duration) ([]lifecycle.Claim, error) {
				ids, err := attempts.ClaimExpired(ctx, q, max, lease)
				claims := make([]lifecycle.Claim, len(ids))
				for i, id := range ids {
					claims[i] = lifecycle.Claim{ID: id, Status: attempts.Authorized}
				}
				return claims, err
			},
			release: attempts.ReleaseClaims, schedule: attempts.ScheduleNextCheck,
			tally: func(sum *Summary, got Summary) {
				sum.Expired += got.expired
				sum.NeedsReview += got.NeedsReview
				sum.Errors += got.Errors
			},
			sync: paymentSync(r.svc.CheckHeld),
		},
	}
}

// operationTarget is the target of one kind of operation on a payment,
// whose counts go to the summary's part of.
func operationTarget(name string,
	claim func(context.Context, db.DBTX, time.Duration, int, time.Duration) ([]lifecycle.Claim, error),
	release func(context.Context, db.DBTX, []string, time.Duration) error,
	schedule func(context.Context, db.DBTX, string, int, time.Duration, bool) (bool, error),
	of func(*Summary) *OperationSummary,
	sync func(context.Context, string, payments.SyncOptions) (lifecycle.Status, *string, payments.SyncOutcome, error),
) target {
	return target{
		name: name, claim: claim, release: release, schedule: schedule, sync: sync,
		tally: func(sum *Summary, got Summary) {
			*of(sum) = OperationSummary{Checked: got.Checked, Succeeded: got.Succeeded, Failed: got.Failed, StillUnknown: got.StillUnknown}
			sum.NeedsReview += got.NeedsReview
			sum.Errors += got.Errors
		},
	}
}

// holdTarget is the target of the captures or the voids (k).
func (r *Reconciler) holdTarget(k captures.Kind, of func(*Summary) *OperationSummary) target {
	return operationTarget(string(k),
		func(ctx context.Context, q db.DBTX, minAge time.Duration, max int, lease time.Duration) ([]lifecycle.Claim, error) {
			return captures.ClaimDue(ctx, q, k, minAge, max, lease)
		},
		captures.ReleaseClaims, captures.ScheduleNextCheck, of,
		func(ctx context.Context, id string, opt payments.SyncOptions) (lifecycle.Status, *string, payments.SyncOutcome, error) {
			c, outcome, err := r.svc.SyncCapture(ctx, id, opt)
			return c.Status, c.FailureCode, outcome, err
		})
}

// Run resolves due attempts batch by batch until a claim comes back short
// (nothing more is due), the provider's breaker opens, or ctx ends. It
// returns ErrProviderUnreachable, before touching anything, if the provider
// does not answer at all; an error of the database stops it and is returned
// with what was done so far.
func (r *Reconciler) Run(ctx context.Context) (sum Summary, err error) {
	ctx, span := tracing.Start(ctx, "reconciler run")
	defer func() { endSpan(span, err) }()
	if err := r.probe(ctx); err != nil {
		return sum, err
	}
	for _, t := range r.targets() {
		got, complete, err := r.runTarget(ctx, t)
		t.tally(&sum, got)
		if err != nil {
			return sum, err
		}
		if !complete {
			// The breaker opened or the deadline passed: the rest waits for
			// the next run.
			r.log.InfoContext(ctx, "reconciler run done", "summary", sum, "stopped_early", true)
			return sum, nil
		}
	}
	r.log.InfoContext(ctx, "reconciler run done", "summary", sum, "stopped_early", false)
	return sum, nil
}

// runTarget resolves t's due items batch by batch until a claim comes back
// short (nothing more is due) or a batch stops early (complete false).
func (r *Reconciler) runTarget(ctx context.Context, t target) (sum Summary, complete bool, err error) {
	for {
		if err := ctx.Err(); err != nil {
			return sum, false, err
		}
		started := time.Now()
		claims, err := t.claim(ctx, r.pool, r.cfg.MinAge, r.cfg.BatchSize, r.cfg.Lease)
		if err != nil {
			return sum, false, fmt.Errorf("claim due %ss: %w", t.name, err)
		}
		// No check starts after this: one that starts before it ends well
		// inside the lease, since a check lasts less than the lock TTL.
		deadline := started.Add(r.cfg.Lease - r.timing.LockTTL)
		got, complete, err := r.runBatch(ctx, t, claims, deadline)
		sum.add(got)
		if err != nil {
			return sum, false, err
		}
		if err := ctx.Err(); err != nil {
			return sum, false, err // stopped (SIGTERM): not a finished job
		}
		if !complete || len(claims) < r.cfg.BatchSize {
			return sum, complete, nil
		}
	}
}

// runBatch checks claims with Workers at a time. complete is false when it
// left some unchecked (deadline passed, breaker open or ctx ended); those are
// handed back due at once, without counting a check.
func (r *Reconciler) runBatch(ctx context.Context, t target, claims []lifecycle.Claim, deadline time.Time) (sum Summary, complete bool, err error) {
	var (
		mu        sync.Mutex
		unchecked []string
		stopped   string
		wg        sync.WaitGroup
		next      = make(chan lifecycle.Claim, len(claims))
	)
	for _, c := range claims {
		next <- c
	}
	close(next)
	for range r.cfg.Workers {
		wg.Go(func() {
			for c := range next {
				// Judged by each worker just before its check, so that no
				// check starts once the reason to stop is there.
				reason := r.stopReason(ctx, deadline)
				var got Summary
				if reason == "" {
					got, reason = r.check(ctx, t, c)
				}
				mu.Lock()
				if reason != "" {
					unchecked, stopped = append(unchecked, c.ID), reason
				} else {
					sum.add(got)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(unchecked) == 0 {
		return sum, true, nil
	}
	r.log.Warn("stopping the run before the end of a batch", "reason", stopped, "unchecked", len(unchecked))
	// The claim's ctx may be over: the hand-back must still happen (the
	// pool bounds it by DATABASE_TIMEOUT).
	if err := t.release(context.WithoutCancel(ctx), r.pool, unchecked, 0); err != nil {
		return sum, false, fmt.Errorf("hand back unchecked %ss: %w", t.name, err)
	}
	return sum, false, nil
}

// stopReason says why no further check of the batch should start, or "".
func (r *Reconciler) stopReason(ctx context.Context, deadline time.Time) string {
	switch {
	case ctx.Err() != nil:
		return "cancelled"
	case !time.Now().Before(deadline):
		return "batch deadline (lease minus lock TTL) reached"
	case r.allBreakersOpen():
		// Every further look-up would be refused: leave the attempts due for
		// the next run instead of spending a step of their schedule.
		return "provider circuit breaker open"
	}
	return ""
}

// check resolves one claimed attempt with Sync and records what follows. A
// non-empty stop says the attempt was not checked after all (the breaker
// refused the look-up) and why; it is handed back, and the run stops.
func (r *Reconciler) check(ctx context.Context, t target, c lifecycle.Claim) (sum Summary, stop string) {
	sum = Summary{Checked: 1}
	log := r.log.With(t.name+"_id", c.ID)
	ctx, span := tracing.Start(ctx, "reconciler check "+t.name, attribute.String(t.name+".id", c.ID))
	defer func() {
		span.SetAttributes(attribute.Int("reconciler.checks", c.CheckCount+1),
			attribute.Bool("reconciler.resolved", sum.Succeeded+sum.Failed > 0),
			attribute.Bool("reconciler.error", sum.Errors > 0))
		span.End()
	}()
	status, failureCode, outcome, err := t.sync(ctx, c.ID, payments.SyncOptions{Source: attempts.SourceReconciler, AbandonCreated: true})
	switch {
	case errors.Is(err, provider.ErrUnavailable):
		// Refused before anything was sent: not a check of this attempt.
		if r.allBreakersOpen() {
			return Summary{}, "provider circuit breaker open"
		}
		// Only its provider's breaker is open: it waits (the others go on).
		log.Info(t.name + " provider's breaker open, checking later")
		if err := t.release(context.WithoutCancel(ctx), r.pool, []string{c.ID}, r.cfg.jitter(r.timing.BreakerCooldown)); err != nil {
			log.Error("hand back "+t.name, "err", err)
		}
		return Summary{}, ""
	case err == nil && outcome == payments.Resolved:
		switch status {
		case attempts.Succeeded:
			sum.Succeeded = 1
		case attempts.Authorized:
			sum.Authorized = 1
		default:
			sum.Failed = 1
			if status == attempts.Canceled && deref(failureCode) == lifecycle.CanceledExpired {
				sum.expired = 1
			}
		}
		log.InfoContext(ctx, t.name+" resolved", "status", status, "why", deref(failureCode))
		return sum, ""
	case err == nil && outcome == payments.Busy:
		// A live request (or another reconciler past our lease) holds the
		// key: not a check; look again once that lock must have expired.
		sum.StillUnknown = 1
		log.InfoContext(ctx, "attempt key busy, checking later")
		if err := t.release(context.WithoutCancel(ctx), r.pool, []string{c.ID}, r.cfg.jitter(r.timing.LockTTL)); err != nil {
			log.ErrorContext(ctx, "hand back busy attempt", "err", err)
			sum.Errors = 1
		}
		return sum, ""
	case err != nil && outcome != payments.Unreachable:
		// A database error (or a key lost to a takeover): the lease expires
		// and a later run tries again; the schedule is not advanced.
		sum.StillUnknown, sum.Errors = 1, 1
		log.ErrorContext(ctx, "attempt check failed", "err", err)
		return sum, ""
	}
	// StillUnknown, or Unreachable: one step of the schedule.
	sum.StillUnknown = 1
	if err != nil {
		sum.Errors = 1
		log.WarnContext(ctx, "provider could not be asked", "err", err)
	}
	flagged, serr := r.schedule(ctx, t, c)
	if serr != nil {
		log.ErrorContext(ctx, "schedule next check", "err", serr)
		sum.Errors = 1
	}
	if flagged {
		sum.NeedsReview = 1
		log.WarnContext(ctx, "attempt needs review: check schedule spent", "checks", c.CheckCount+1)
	}
	return sum, ""
}

// schedule records an unresolved check and reports whether it newly flagged
// the attempt for review.
func (r *Reconciler) schedule(ctx context.Context, t target, c lifecycle.Claim) (bool, error) {
	checks := c.CheckCount + 1
	delay, spent := r.cfg.nextDelay(checks)
	recorded, err := t.schedule(context.WithoutCancel(ctx), r.pool, c.ID, checks, delay, spent)
	if err != nil {
		return false, err
	}
	// Not recorded: resolved meanwhile (a webhook): nothing to schedule or flag.
	return recorded && spent && !c.NeedsReview, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// endSpan ends a job's span, marking it failed with err.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "job failed")
	}
	span.End()
}
