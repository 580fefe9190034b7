package payments

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/captures"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/lifecycle"
)

// CheckHeld asks the provider about AUTHORIZED payment id and applies what
// its charge shows now: captured (SUCCEEDED, with the provider's
// amount_captured), voided or expired (CANCELED) at the provider; an
// authorization still held changes nothing (StillUnknown). GET ?sync=true
// of an AUTHORIZED payment and the reconciler's expiry check use it.
//
// The payment's key holds its stored answer (the 201 AUTHORIZED) by now, so
// its lock is no fence here. The fence is the payment's row and its
// capture or void: a capture or void of ours that is not FAILED decides
// the payment itself (it is passed over: Busy), and a new one is created
// only under the payment's row lock after checking the payment is
// AUTHORIZED with none. CheckHeld reads the charge without holding
// anything, then, under the payment's row lock, applies what it read only
// if the payment is still AUTHORIZED and still has no such capture or
// void: whichever of the two commits second sees the other.
func (s *Service) CheckHeld(ctx context.Context, id string, opt SyncOptions) (attempts.Attempt, SyncOutcome, error) {
	ctx = context.WithoutCancel(ctx)
	a, err := attempts.Get(ctx, s.pool, id)
	if err != nil {
		return attempts.Attempt{}, 0, err
	}
	if a.Status != attempts.Authorized {
		return a, outcomeOf(a.Status), nil
	}
	if held, err := heldByOurs(ctx, s.pool, id); err != nil || held {
		return a, Busy, err
	}
	p, err := s.Provider(s.pinned(paymentSubject(a)))
	if err != nil {
		return a, Unreachable, err
	}
	ch, err := p.GetCharge(ctx, deref(a.ProviderChargeID))
	if err != nil {
		return a, Unreachable, fmt.Errorf("ask provider about the charge of %s: %w", id, err)
	}
	c := chargeChange(ch, true)
	if c.to == lifecycle.Authorized || c.to == lifecycle.Failed {
		return a, StillUnknown, nil // still held (or nonsense: a human sees the log)
	}
	o := opt.origin()
	c.id, c.source, c.reason = id, o.source(), o.says("provider shows the charge "+ch.Status)
	outcome, moved := Resolved, false
	err = db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		now, err := attempts.Lock(ctx, tx, id)
		if err != nil {
			return err
		}
		if now.Status != attempts.Authorized {
			a = now
			return nil // moved meanwhile: by whatever moved it
		}
		if held, err := heldByOurs(ctx, tx, id); err != nil || held {
			outcome = Busy
			return err
		}
		a, moved, err = attempts.Transition(ctx, tx, paymentChange(c))
		return err
	})
	if err != nil {
		return attempts.Attempt{}, 0, err
	}
	if moved {
		charges{s}.counted(a.Status, o.source())
	}
	return a, outcome, nil
}

// heldByOurs reports whether payment id has a capture or void of ours that
// is not FAILED.
func heldByOurs(ctx context.Context, q db.DBTX, id string) (bool, error) {
	_, err := captures.LiveOf(ctx, q, id)
	if errors.Is(err, captures.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// outcomeOf is the outcome of a check that found a payment in status st.
func outcomeOf(st lifecycle.Status) SyncOutcome {
	if st.Answered() {
		return Resolved
	}
	return StillUnknown
}
