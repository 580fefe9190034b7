package payments

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/refunds"
)

// SyncOutcome is what Sync did.
type SyncOutcome int

// The outcomes of Sync.
const (
	// Resolved: the attempt (or refund) is final (it may have been final already).
	Resolved SyncOutcome = iota + 1
	// StillUnknown: the provider has no answer yet; nothing changed.
	StillUnknown
	// Busy: a live request (or another reconciler) holds the key; nothing done.
	Busy
	// Unreachable: the provider could not be asked; nothing changed.
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

// SyncOptions say how Sync treats what never reached the provider.
type SyncOptions struct {
	Source attempts.Source
	// Operator is the console's operator that asked (named in the audit
	// reason), "" for everyone else.
	Operator string
	// AbandonCreated fails a CREATED attempt (or refund) as "abandoned"
	// without asking the provider (the reconciler, for those older than its
	// min age).
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
	sub, outcome, err := s.sync(ctx, charges{s}, id, opt)
	a, _ := sub.rec.(attempts.Attempt)
	return a, outcome, err
}

// SyncRefund is Sync for refund id.
func (s *Service) SyncRefund(ctx context.Context, id string, opt SyncOptions) (refunds.Refund, SyncOutcome, error) {
	sub, outcome, err := s.sync(ctx, refundsKind{s}, id, opt)
	rec, _ := sub.rec.(refundRecord)
	return rec.Refund, outcome, err
}

func (s *Service) sync(ctx context.Context, k kind, id string, opt SyncOptions) (subject, SyncOutcome, error) {
	ctx = context.WithoutCancel(ctx)
	lock, ok, err := k.takeOver(ctx, id)
	if err != nil {
		return subject{}, 0, err
	}
	if !ok {
		sub, err := k.load(ctx, s.pool, id)
		if err != nil {
			return subject{}, 0, err
		}
		if sub.status.Final() {
			return sub, Resolved, nil
		}
		return sub, Busy, nil
	}
	sub, err := k.load(ctx, s.pool, id)
	if err != nil {
		return subject{}, 0, s.releaseAfter(ctx, lock, err)
	}
	c, outcome, err := s.learn(ctx, k, sub, opt)
	if c != nil {
		c.reason = lifecycle.ByOperator(c.reason, opt.Operator)
	}
	if err != nil || c == nil {
		if rerr := s.releaseAfter(ctx, lock, nil); rerr != nil {
			return sub, 0, rerr
		}
		return sub, outcome, err
	}
	if _, err := s.finish(ctx, k, lock, *c); err != nil {
		return sub, 0, err
	}
	if sub, err = k.load(ctx, s.pool, id); err != nil {
		return subject{}, 0, err
	}
	if sub.status.Final() {
		return sub, Resolved, nil
	}
	return sub, StillUnknown, nil
}

// learn decides the change that the provider's answer calls for; nil means
// leave the subject as it is.
func (s *Service) learn(ctx context.Context, k kind, sub subject, opt SyncOptions) (*change, SyncOutcome, error) {
	c := change{id: sub.id, source: opt.Source}
	switch {
	case sub.status.Final():
		c.to = sub.status // stores the final response, changes nothing
		return &c, Resolved, nil
	case sub.status == lifecycle.Created:
		if !opt.AbandonCreated {
			return nil, StillUnknown, nil
		}
		c.to, c.failureCode, c.reason = lifecycle.Failed, lifecycle.FailureAbandoned, "never reached the provider"
		return &c, Resolved, nil
	}
	f, err := k.lookup(ctx, sub)
	switch {
	case errors.Is(err, provider.ErrNotFound):
		quiet, qerr := k.quietFor(ctx, s.pool, sub.id, s.cfg.NoRecordAfter())
		if qerr != nil {
			return nil, 0, qerr
		}
		if !quiet {
			return nil, StillUnknown, nil // a call of ours may still land
		}
		c.to, c.failureCode, c.reason = lifecycle.Failed, lifecycle.FailureProviderNoRecord, "provider has no record for the key"
		return &c, Resolved, nil
	case err != nil:
		return nil, Unreachable, fmt.Errorf("ask provider about %s: %w", sub.id, err)
	}
	c.providerID = f.providerID
	if f.succeeded {
		c.to, c.reason = lifecycle.Succeeded, "provider reports it succeeded"
	} else {
		code := f.failureCode
		if code == "" {
			code = "provider_failed"
		}
		c.to, c.failureCode, c.reason = lifecycle.Failed, code, "provider reports it failed"
	}
	return &c, Resolved, nil
}

// releaseAfter unlocks the key and returns cause (or the release's error).
func (s *Service) releaseAfter(ctx context.Context, lock idempotency.Lock, cause error) error {
	if _, err := idempotency.Release(ctx, s.pool, lock); err != nil && cause == nil {
		return err
	}
	return cause
}
