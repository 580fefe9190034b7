package testdb

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/captures"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/payments"
)

// CaptureOpts describe a capture or void to seed, of an AUTHORIZED payment.
type CaptureOpts struct {
	Payment Seeded        // required: AUTHORIZED (seed it with Attempt)
	Kind    captures.Kind // default captures.KindCapture
	Amount  *int64        // a capture's; nil: all that is held
	Reason  *string       // a void's
	// Status is reached from CREATED along the path the API takes (PENDING,
	// then UNKNOWN or FAILED), each step audited with source api. A
	// SUCCEEDED one is not seeded here: the service's flow makes those.
	Status      lifecycle.Status // default CREATED
	FailureCode string           // for FAILED; default "charge_not_capturable"
	Key         string           // its Idempotency-Key; default "key-" + its id
	Fingerprint []byte           // default Fingerprint
	KeyState    KeyState         // default KeyReleased (KeyCompleted for FAILED)
	LockTTL     time.Duration    // how long KeyLocked holds; default 10 minutes
	Age         time.Duration    // updated_at = now() - Age, with SQL
}

var capturePaths = map[lifecycle.Status][]lifecycle.Status{
	lifecycle.Created: nil,
	lifecycle.Pending: {lifecycle.Pending},
	lifecycle.Unknown: {lifecycle.Pending, lifecycle.Unknown},
	lifecycle.Failed:  {lifecycle.Pending, lifecycle.Failed},
}

// Capture seeds a capture or void the way the service leaves it: its key
// and its CREATED row committed together (idempotency.AcquireForCapture,
// captures.Create under the payment's row lock), the audited transitions
// to o.Status, and the key locked, released or completed.
func Capture(t testing.TB, pool *db.Pool, o CaptureOpts) captures.Capture {
	t.Helper()
	ctx := seedContext(t)
	if o.Kind == "" {
		o.Kind = captures.KindCapture
	}
	if o.Status == "" {
		o.Status = lifecycle.Created
	}
	path, ok := capturePaths[o.Status]
	if !ok {
		t.Fatalf("testdb: seed a capture in status %q", o.Status)
	}
	if o.FailureCode == "" {
		o.FailureCode = "charge_not_capturable"
	}
	id := o.Kind.NewID()
	if o.Key == "" {
		o.Key = "key-" + id
	}
	if o.Fingerprint == nil {
		o.Fingerprint = Fingerprint
	}
	if o.KeyState == 0 {
		o.KeyState = KeyReleased
		if o.Status.Final() {
			o.KeyState = KeyCompleted
		}
	}
	if o.LockTTL == 0 {
		o.LockTTL = 10 * time.Minute
	}
	res, err := idempotency.AcquireForCapture(ctx, pool, idempotency.Config{LockTTL: o.LockTTL, KeyTTL: payments.DefaultKeyTTL},
		o.Payment.TenantID, o.Key, o.Fingerprint, id, func(ctx context.Context, tx pgx.Tx, id string) error {
			_, _, err := captures.Create(ctx, tx, captures.New{
				ID: id, Kind: o.Kind, TenantID: o.Payment.TenantID, PaymentID: o.Payment.ID, IdempotencyKey: o.Key,
				Amount: o.Amount, Reason: o.Reason,
			})
			return err
		})
	if err != nil || !res.Created {
		t.Fatalf("testdb: seed %s of %s: created %v, %v", o.Kind, o.Payment.ID, res.Created, err)
	}
	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		for _, to := range path {
			ch := captures.Change{ID: id, To: to, Source: lifecycle.SourceAPI, Reason: "fixture"}
			if to == lifecycle.Failed {
				ch.FailureCode = o.FailureCode
			}
			if _, _, err := captures.Transition(ctx, tx, ch); err != nil {
				return err
			}
		}
		switch o.KeyState {
		case KeyReleased:
			_, err = idempotency.Release(ctx, tx, res.Lock)
		case KeyCompleted:
			_, err = idempotency.Complete(ctx, tx, res.Lock, 402, []byte("{}"))
		}
		return err
	})
	if err != nil {
		t.Fatalf("testdb: seed %s %s: %v", o.Kind, id, err)
	}
	if o.Age != 0 {
		if _, err := pool.Exec(ctx, `UPDATE captures SET updated_at = now() - $2::bigint * interval '1 millisecond' WHERE id = $1`,
			id, o.Age.Milliseconds()); err != nil {
			t.Fatalf("testdb: seed %s %s: age: %v", o.Kind, id, err)
		}
	}
	c, err := captures.Get(ctx, pool, id)
	if err != nil {
		t.Fatalf("testdb: read seeded %s %s: %v", o.Kind, id, err)
	}
	return c
}
