package payments

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/provider"
)

// SyncOutcome is what Sync did.
type SyncOutcome int

// The outcomes of Sync.
const (
	// Resolved: the attempt is final (it may have been final already).
	Resolved SyncOutcome = iota + 1
	// StillUnknown: the provider has no answer yet; the attempt is unchanged.
	StillUnknown
	// Busy: a live request (or another reconciler) holds the key; nothing done.
	Busy
	// Unreachable: the provider could not be asked; the attempt is unchanged.
	Unreachable
)

func (o SyncOutcome) String() string {
	switch o {
	case Resolved:
		return "resolved"
	case StillUnknown:
		return "still_unknown"
	case Busy:
		return "busy"
	case Unreachable:
		return "unreachable"
	}
	return "invalid"
}

// SyncOptions say how Sync treats attempts that never reached the provider.
type SyncOptions struct {
	Source attempts.Source
	// AbandonCreated fails a CREATED attempt as "abandoned" without asking
	// the provider (the reconciler, for attempts older than its min age).
	AbandonCreated bool
}

// NoRecordAfter is how long an attempt must have been quiet before "not
// found at the provider" proves that no call of ours can still land.
func (c Config) NoRecordAfter() time.Duration {
	return c.LockTTL + c.RetryBudget + c.CallTimeout
}

// Sync resolves attempt id by asking the provider what it holds under the
// derived key, while holding the attempt's idempotency key lock exactly as a
// retrying request would, so it never races a live request. A resolution
// also stores the key's final response, so that a client's later retry gets
// the truth as a replay.
func (s *Service) Sync(ctx context.Context, id string, opt SyncOptions) (attempts.Attempt, SyncOutcome, error) {
	ctx = context.WithoutCancel(ctx)
	lock, ok, err := idempotency.TakeOverForAttempt(ctx, s.pool, s.cfg.keys(), id)
	if err != nil {
		return attempts.Attempt{}, 0, err
	}
	if !ok {
		a, err := attempts.Get(ctx, s.pool, id)
		if err != nil {
			return attempts.Attempt{}, 0, err
		}
		if a.Status.Final() {
			return a, Resolved, nil
		}
		return a, Busy, nil
	}
	a, err := attempts.Get(ctx, s.pool, id)
	if err != nil {
		return attempts.Attempt{}, 0, s.releaseAfter(ctx, lock, err)
	}
	change, outcome, err := s.learn(ctx, a, opt)
	if err != nil || change == nil {
		if rerr := s.releaseAfter(ctx, lock, nil); rerr != nil {
			return a, 0, rerr
		}
		return a, outcome, err
	}
	if _, err := s.finish(ctx, lock, *change); err != nil {
		return a, 0, err
	}
	a, err = attempts.Get(ctx, s.pool, id)
	if err != nil {
		return attempts.Attempt{}, 0, err
	}
	if a.Status.Final() {
		return a, Resolved, nil
	}
	return a, StillUnknown, nil
}

// learn decides the change that the provider's answer calls for; nil means
// leave the attempt as it is.
func (s *Service) learn(ctx context.Context, a attempts.Attempt, opt SyncOptions) (*attempts.Change, SyncOutcome, error) {
	base := attempts.Change{ID: a.ID, Source: opt.Source}
	switch {
	case a.Status.Final():
		base.To = a.Status // stores the final response, changes nothing
		return &base, Resolved, nil
	case a.Status == attempts.Created:
		if !opt.AbandonCreated {
			return nil, StillUnknown, nil
		}
		base.To, base.FailureCode, base.Reason = attempts.Failed, attempts.FailureAbandoned, "never reached the provider"
		return &base, Resolved, nil
	}
	ch, err := s.provider.ChargeByKey(ctx, attempts.ProviderKey(a.ID))
	switch {
	case errors.Is(err, provider.ErrNotFound):
		quiet, qerr := attempts.QuietFor(ctx, s.pool, a.ID, s.cfg.NoRecordAfter())
		if qerr != nil {
			return nil, 0, qerr
		}
		if !quiet {
			return nil, StillUnknown, nil // a call of ours may still land
		}
		base.To, base.FailureCode, base.Reason = attempts.Failed, attempts.FailureProviderNoRecord, "provider has no charge for the key"
		return &base, Resolved, nil
	case err != nil:
		return nil, Unreachable, fmt.Errorf("ask provider about %s: %w", a.ID, err)
	}
	base.ChargeID = ch.ID
	if ch.Status == provider.ChargeSucceeded {
		base.To, base.Reason = attempts.Succeeded, "provider reports the charge succeeded"
	} else {
		code := ch.FailureCode
		if code == "" {
			code = "provider_failed"
		}
		base.To, base.FailureCode, base.Reason = attempts.Failed, code, "provider reports the charge failed"
	}
	return &base, Resolved, nil
}

// releaseAfter unlocks the key and returns cause (or the release's error).
func (s *Service) releaseAfter(ctx context.Context, lock idempotency.Lock, cause error) error {
	if _, err := idempotency.Release(ctx, s.pool, lock); err != nil && cause == nil {
		return err
	}
	return cause
}
