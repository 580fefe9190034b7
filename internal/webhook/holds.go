package webhook

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/captures"
	"github.com/acme/paymentsvc/internal/lifecycle"
)

// holdKinds are the events a capture or void of ours may be behind.
var holdKinds = map[string]captures.Kind{EventChargeCaptured: captures.KindCapture, EventChargeVoided: captures.KindVoid}

// ourHold finds the capture or void of ours that event ev (charge.captured
// or charge.voided) about payment a is the doing of: the one the charge's
// capture_key or void_key names, else the payment's own capture or void of
// that kind that may have reached the provider (PENDING or UNKNOWN). None:
// the provider did it without us.
func ourHold(ctx context.Context, tx pgx.Tx, a attempts.Attempt, ev event) (captures.Capture, bool, error) {
	k, ok := holdKinds[ev.Type]
	if !ok {
		return captures.Capture{}, false, nil
	}
	key := ev.Data.Charge.CaptureKey
	if k == captures.KindVoid {
		key = ev.Data.Charge.VoidKey
	}
	if id := captures.IDOfProviderKey(k, key); id != "" {
		c, err := captures.Get(ctx, tx, id)
		switch {
		case err == nil && c.PaymentID == a.ID:
			return c, true, nil
		case err != nil && !errors.Is(err, captures.ErrNotFound):
			return captures.Capture{}, false, fmt.Errorf("find %s by key: %w", k, err)
		}
	}
	if key != "" {
		return captures.Capture{}, false, nil // made under a key that is not one of ours
	}
	c, err := captures.LiveOf(ctx, tx, a.ID)
	switch {
	case errors.Is(err, captures.ErrNotFound):
		return captures.Capture{}, false, nil
	case err != nil:
		return captures.Capture{}, false, fmt.Errorf("find the payment's %s: %w", k, err)
	}
	ours := c.Kind == k && (c.Status == lifecycle.Pending || c.Status == lifecycle.Unknown)
	return c, ours, nil
}

// applyHold makes our capture or void agree with ev: a PENDING or UNKNOWN
// one becomes SUCCEEDED (and its payment SUCCEEDED or CANCELED with it); a
// final one that agrees is a no-op, one that does not an anomaly.
func applyHold(ctx context.Context, tx pgx.Tx, ev event, a attempts.Attempt, op captures.Capture) (result, error) {
	var v verdict
	c, moved, err := captures.Update(ctx, tx, op.ID, func(c captures.Capture) (captures.Change, bool) {
		v = report(c.Status, lifecycle.Succeeded)
		ch := captures.Change{To: lifecycle.Succeeded, Source: lifecycle.SourceWebhook, Reason: ev.Type + " " + ev.ID}
		if c.Kind == captures.KindCapture {
			ch.Captured = ev.Data.Charge.CapturedAmount()
		}
		return ch, v.kind == verdictMove
	})
	if err != nil {
		return result{}, err
	}
	res := result{attemptID: c.PaymentID, captureID: c.ID, captureKind: c.Kind}
	err = settle(&res, moved, v, func(reason string) error {
		an := anomaly(anomalyConflictingReport, ev, &a, reason)
		an.Detail.(map[string]any)[string(c.Kind)+"_id"] = c.ID
		return attempts.RecordAnomaly(ctx, tx, an)
	})
	return res, err
}
