package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/provider"
)

// Summary is what one Run did, printed as the job's JSON line. Every checked
// attempt is counted in exactly one of Succeeded, Failed and StillUnknown;
// NeedsReview and Errors count some of the StillUnknown ones again.
type Summary struct {
	// Checked is the attempts this run claimed and examined.
	Checked int `json:"checked"`
	// Succeeded and Failed are the checked attempts that were SUCCEEDED or
	// FAILED when their check ended (FAILED includes CREATED attempts failed
	// as abandoned).
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
}

func (s *Summary) add(o Summary) {
	s.Checked += o.Checked
	s.Succeeded += o.Succeeded
	s.Failed += o.Failed
	s.StillUnknown += o.StillUnknown
	s.NeedsReview += o.NeedsReview
	s.Errors += o.Errors
}

// Run resolves due attempts batch by batch until a claim comes back short
// (nothing more is due), the provider's breaker opens, or ctx ends. It
// returns ErrProviderUnreachable, before touching anything, if the provider
// does not answer at all; an error of the database stops it and is returned
// with what was done so far.
func (r *Reconciler) Run(ctx context.Context) (Summary, error) {
	var sum Summary
	if err := r.probe(ctx); err != nil {
		return sum, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		started := time.Now()
		claims, err := r.claim(ctx)
		if err != nil {
			return sum, err
		}
		// No check starts after this: one that starts before it ends well
		// inside the lease, since a check lasts less than the lock TTL.
		deadline := started.Add(r.cfg.Lease - r.timing.LockTTL)
		got, complete, err := r.runBatch(ctx, claims, deadline)
		sum.add(got)
		if err != nil {
			return sum, err
		}
		if err := ctx.Err(); err != nil {
			return sum, err // stopped (SIGTERM): not a finished job
		}
		if !complete || len(claims) < r.cfg.BatchSize {
			r.log.Info("reconciler run done", "summary", sum, "stopped_early", !complete)
			return sum, nil
		}
	}
}

func (r *Reconciler) claim(ctx context.Context) ([]attempts.Claim, error) {
	claims, err := attempts.ClaimDue(ctx, r.pool, r.cfg.MinAge, r.cfg.BatchSize, r.cfg.Lease)
	if err != nil {
		return nil, fmt.Errorf("claim due attempts: %w", err)
	}
	return claims, nil
}

// runBatch checks claims with Workers at a time. complete is false when it
// left some unchecked (deadline passed, breaker open or ctx ended); those are
// handed back due at once, without counting a check.
func (r *Reconciler) runBatch(ctx context.Context, claims []attempts.Claim, deadline time.Time) (sum Summary, complete bool, err error) {
	var (
		mu        sync.Mutex
		unchecked []string
		stopped   string
		wg        sync.WaitGroup
		next      = make(chan attempts.Claim, len(claims))
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
					got, reason = r.check(ctx, c)
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
	// The claim's ctx may be over: the hand-back must still happen.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := attempts.ReleaseClaims(hctx, r.pool, unchecked, 0); err != nil {
		return sum, false, fmt.Errorf("hand back unchecked attempts: %w", err)
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
	case r.provider.BreakerOpen():
		// Every further look-up would be refused: leave the attempts due for
		// the next run instead of spending a step of their schedule.
		return "provider circuit breaker open"
	}
	return ""
}

// check resolves one claimed attempt with Sync and records what follows. A
// non-empty stop says the attempt was not checked after all (the breaker
// refused the look-up) and why; it is handed back, and the run stops.
func (r *Reconciler) check(ctx context.Context, c attempts.Claim) (sum Summary, stop string) {
	sum = Summary{Checked: 1}
	log := r.log.With("payment_id", c.ID)
	a, outcome, err := r.svc.Sync(ctx, c.ID, payments.SyncOptions{Source: attempts.SourceReconciler, AbandonCreated: true})
	switch {
	case errors.Is(err, provider.ErrUnavailable):
		// Refused before anything was sent: not a check of this attempt.
		return Summary{}, "provider circuit breaker open"
	case err == nil && outcome == payments.Resolved:
		if a.Status == attempts.Succeeded {
			sum.Succeeded = 1
		} else {
			sum.Failed = 1
		}
		log.Info("attempt resolved", "status", a.Status, "failure_code", deref(a.FailureCode))
		return sum, ""
	case err == nil && outcome == payments.Busy:
		// A live request (or another reconciler past our lease) holds the
		// key: not a check; look again once that lock must have expired.
		sum.StillUnknown = 1
		log.Info("attempt key busy, checking later")
		if err := r.release(ctx, c, r.cfg.jitter(r.timing.LockTTL)); err != nil {
			log.Error("hand back busy attempt", "err", err)
			sum.Errors = 1
		}
		return sum, ""
	case err != nil && outcome != payments.Unreachable:
		// A database error (or a key lost to a takeover): the lease expires
		// and a later run tries again; the schedule is not advanced.
		sum.StillUnknown, sum.Errors = 1, 1
		log.Error("attempt check failed", "err", err)
		return sum, ""
	}
	// StillUnknown, or Unreachable: one step of the schedule.
	sum.StillUnknown = 1
	if err != nil {
		sum.Errors = 1
		log.Warn("provider could not be asked", "err", err)
	}
	flagged, serr := r.schedule(ctx, c)
	if serr != nil {
		log.Error("schedule next check", "err", serr)
		sum.Errors = 1
	}
	if flagged {
		sum.NeedsReview = 1
		log.Warn("attempt needs review: check schedule spent", "checks", c.CheckCount+1)
	}
	return sum, ""
}

// schedule records an unresolved check and reports whether it newly flagged
// the attempt for review.
func (r *Reconciler) schedule(ctx context.Context, c attempts.Claim) (bool, error) {
	checks := c.CheckCount + 1
	delay, spent := r.cfg.nextDelay(checks)
	recorded, err := attempts.ScheduleNextCheck(context.WithoutCancel(ctx), r.pool, c.ID, checks, delay, spent)
	if err != nil {
		return false, err
	}
	// Not recorded: resolved meanwhile (a webhook): nothing to schedule or flag.
	return recorded && spent && !c.NeedsReview, nil
}

func (r *Reconciler) release(ctx context.Context, c attempts.Claim, delay time.Duration) error {
	return attempts.ReleaseClaims(context.WithoutCancel(ctx), r.pool, []string{c.ID}, delay)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
