package testdb

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/operators"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/tenants"
	"github.com/acme/paymentsvc/internal/testkit"
)

// The fixtures below seed one table each, with an options struct whose zero
// fields take defaults. They write through the package that owns the table
// (tenants.Create, idempotency.Acquire, attempts.Insert/Transition,
// outbox.Enqueue, attempts.RecordAnomaly), so that a seeded row is one the
// service could have written; SQL only sets what no function of the service
// can (an attempt's age and the reconciler's bookkeeping, a recorded webhook
// event). Each fails the test on error.

// seedTimeout bounds one fixture's work.
const seedTimeout = time.Minute

func seedContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), seedTimeout)
	t.Cleanup(cancel)
	return ctx
}

// TenantOpts describe a tenant to seed.
type TenantOpts struct {
	Name string // default "test shop"
}

// Tenant seeds a tenant through tenants.Create and returns it with its API key.
func Tenant(t testing.TB, q db.DBTX, o TenantOpts) tenants.Created {
	t.Helper()
	if o.Name == "" {
		o.Name = "test shop"
	}
	tn, err := tenants.Create(seedContext(t), q, o.Name)
	if err != nil {
		t.Fatalf("testdb: seed tenant: %v", err)
	}
	return tn
}

// KeyState is the state an attempt's idempotency key is left in.
type KeyState int

// The states of a seeded key.
const (
	// KeyLocked: a live request holds the key (the Lock is returned).
	KeyLocked KeyState = iota + 1
	// KeyReleased: unlocked without a response; a request with it resumes
	// the attempt.
	KeyReleased
	// KeyCompleted: the key holds a final response; a request with it replays it.
	KeyCompleted
)

// Fingerprint is the request fingerprint of a seeded key unless the
// options give one; a request whose fingerprint differs is a mismatch.
var Fingerprint = fingerprint("testdb fixture")

func fingerprint(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// AttemptOpts describe an attempt to seed with its idempotency key.
type AttemptOpts struct {
	TenantID      string // default: a new tenant
	ID            string // default attempts.NewID()
	OrderID       string // default "order-" + ID
	Amount        int64  // default 500
	Currency      string // default "USD"
	PaymentMethod string // default "pm_card_visa"
	Description   *string
	Metadata      map[string]string

	// Provider is the provider it goes to with PENDING; default "sim".
	Provider string

	// Status is reached from CREATED along the path the API takes (PENDING,
	// then UNKNOWN, SUCCEEDED or FAILED; a manual payment's AUTHORIZED,
	// and CANCELED after it), each step audited with source api; a
	// SUCCEEDED attempt gets its PaymentSucceeded outbox row (and so on).
	Status      attempts.Status // default CREATED
	ChargeID    string          // recorded on entering SUCCEEDED, FAILED or AUTHORIZED; "" records none
	FailureCode string          // for FAILED; default "card_declined"
	// CaptureMethod is attempts.CaptureManual by default for AUTHORIZED
	// and CANCELED, else automatic.
	CaptureMethod string
	// CaptureBefore is an AUTHORIZED attempt's deadline; default a week on.
	CaptureBefore time.Time

	Key         string        // its Idempotency-Key; default "key-" + ID
	Fingerprint []byte        // its request fingerprint; default Fingerprint
	KeyState    KeyState      // default KeyCompleted for a final status, else KeyReleased
	LockTTL     time.Duration // how long KeyLocked holds; default 10 minutes
	// Response is what a KeyCompleted key of an attempt that is not final
	// holds (a final attempt's key holds what the service answers for it).
	ResponseCode int    // default 201
	ResponseBody []byte // default {}

	// Set with SQL: no function of the service writes them as a test needs.
	Age         time.Duration  // updated_at = now() - Age: unchanged for that long
	CheckCount  int            // checks the reconciler has made
	NeedsReview bool           // flagged for a human
	NextCheck   *time.Duration // next_check_at = now() + *NextCheck; nil leaves it NULL
}

// Seeded is a seeded attempt, as stored, and the lock its key was acquired
// with (still held when the key is KeyLocked).
type Seeded struct {
	attempts.Attempt
	Lock idempotency.Lock
}

// paths lead from CREATED to each status, as the API moves an attempt.
var paths = map[attempts.Status][]attempts.Status{
	attempts.Created:    nil,
	attempts.Pending:    {attempts.Pending},
	attempts.Unknown:    {attempts.Pending, attempts.Unknown},
	attempts.Succeeded:  {attempts.Pending, attempts.Succeeded},
	attempts.Failed:     {attempts.Pending, attempts.Failed},
	attempts.Authorized: {attempts.Pending, attempts.Authorized},
	attempts.Canceled:   {attempts.Pending, attempts.Authorized, attempts.Canceled},
}

// Attempt seeds an attempt the way the service leaves it: its key and its
// CREATED attempt committed together by idempotency.Acquire, the audited
// transitions to o.Status, and the key locked, released or completed.
func Attempt(t testing.TB, pool *db.Pool, o AttemptOpts) Seeded {
	t.Helper()
	ctx := seedContext(t)
	o = o.withDefaults(t, pool)
	path, ok := paths[o.Status]
	if !ok {
		t.Fatalf("testdb: seed attempt in status %q", o.Status)
	}
	res, err := idempotency.Acquire(ctx, pool, idempotency.Config{LockTTL: o.LockTTL, KeyTTL: payments.DefaultKeyTTL},
		o.TenantID, o.Key, o.Fingerprint, o.ID, InsertAttempt(attempts.New{
			TenantID: o.TenantID, OrderID: o.OrderID, IdempotencyKey: o.Key,
			Amount: o.Amount, Currency: o.Currency, PaymentMethod: o.PaymentMethod,
			Description: o.Description, Metadata: o.Metadata, CaptureMethod: o.CaptureMethod,
		}))
	if err != nil {
		t.Fatalf("testdb: seed attempt %s: %v", o.ID, err)
	}
	if !res.Created {
		t.Fatalf("testdb: seed attempt %s: key %q exists already", o.ID, o.Key)
	}
	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		var a attempts.Attempt
		for _, to := range path {
			c := attempts.Change{ID: o.ID, To: to, Source: attempts.SourceAPI, Reason: "fixture"}
			if to == attempts.Pending {
				c.Provider = o.Provider
			}
			if to.Answered() {
				c.ChargeID = o.ChargeID
			}
			switch to {
			case attempts.Failed:
				c.FailureCode = o.FailureCode
			case attempts.Authorized:
				c.CaptureBefore = &o.CaptureBefore
			case attempts.Canceled:
				c.CanceledReason = "expired"
			}
			var applied bool
			if a, applied, err = attempts.Transition(ctx, tx, c); err != nil {
				return err
			}
			if !applied {
				return fmt.Errorf("transition to %s not applied", to)
			}
		}
		switch {
		case o.KeyState == KeyReleased:
			_, err = idempotency.Release(ctx, tx, res.Lock)
		case o.KeyState == KeyCompleted && o.Status.Answered():
			if a.ID == "" {
				a, err = attempts.Get(ctx, tx, o.ID)
				if err != nil {
					return err
				}
			}
			_, err = payments.FinishKey(ctx, tx, res.Lock, a)
		case o.KeyState == KeyCompleted:
			_, err = idempotency.Complete(ctx, tx, res.Lock, o.ResponseCode, o.ResponseBody)
		}
		return err
	})
	if err != nil {
		t.Fatalf("testdb: seed attempt %s: %v", o.ID, err)
	}
	if o.Age != 0 || o.CheckCount != 0 || o.NeedsReview || o.NextCheck != nil {
		var next *int64
		if o.NextCheck != nil {
			ms := o.NextCheck.Milliseconds()
			next = &ms
		}
		_, err := pool.Exec(ctx, `UPDATE payment_attempts
			SET updated_at = now() - $2::bigint * interval '1 millisecond', check_count = $3, needs_review = $4,
			    next_check_at = now() + $5::bigint * interval '1 millisecond'
			WHERE id = $1`, o.ID, o.Age.Milliseconds(), o.CheckCount, o.NeedsReview, next)
		if err != nil {
			t.Fatalf("testdb: seed attempt %s: age and checks: %v", o.ID, err)
		}
	}
	a, err := attempts.Get(ctx, pool, o.ID)
	if err != nil {
		t.Fatalf("testdb: read seeded attempt %s: %v", o.ID, err)
	}
	return Seeded{Attempt: a, Lock: res.Lock}
}

// InsertAttempt is the idempotency.CreateFunc that inserts n, under the id
// Acquire gives it, as a new key's CREATED attempt.
func InsertAttempt(n attempts.New) idempotency.CreateFunc {
	return func(ctx context.Context, tx pgx.Tx, attemptID string) error {
		n.ID = attemptID
		_, err := attempts.Insert(ctx, tx, n)
		return err
	}
}

func (o AttemptOpts) withDefaults(t testing.TB, pool *db.Pool) AttemptOpts {
	t.Helper()
	if o.TenantID == "" {
		o.TenantID = Tenant(t, pool, TenantOpts{}).ID
	}
	if o.ID == "" {
		o.ID = attempts.NewID()
	}
	if o.OrderID == "" {
		o.OrderID = "order-" + o.ID
	}
	if o.Amount == 0 {
		o.Amount = 500
	}
	if o.Provider == "" {
		o.Provider = "sim"
	}
	if o.Currency == "" {
		o.Currency = "USD"
	}
	if o.PaymentMethod == "" {
		o.PaymentMethod = "pm_card_visa"
	}
	if o.Status == "" {
		o.Status = attempts.Created
	}
	if o.CaptureMethod == "" && (o.Status == attempts.Authorized || o.Status == attempts.Canceled) {
		o.CaptureMethod = attempts.CaptureManual
	}
	if o.CaptureBefore.IsZero() {
		o.CaptureBefore = time.Now().Add(7 * 24 * time.Hour).UTC().Truncate(time.Second)
	}
	if o.FailureCode == "" {
		o.FailureCode = "card_declined"
	}
	if o.Key == "" {
		o.Key = "key-" + o.ID
	}
	if o.Fingerprint == nil {
		o.Fingerprint = Fingerprint
	}
	if o.KeyState == 0 {
		o.KeyState = KeyReleased
		if o.Status.Answered() {
			o.KeyState = KeyCompleted
		}
	}
	if o.LockTTL == 0 {
		o.LockTTL = 10 * time.Minute
	}
	if o.ResponseCode == 0 {
		o.ResponseCode = 201
	}
	if o.ResponseBody == nil {
		o.ResponseBody = []byte("{}")
	}
	return o
}

// KeyOpts describe an idempotency key to seed.
type KeyOpts struct {
	TenantID     string   // default: a new tenant
	Key          string   // default "key-" + the attempt's id
	Fingerprint  []byte   // default Fingerprint
	OrderID      string   // of its attempt; default "order-" + the attempt's id
	State        KeyState // default KeyLocked
	LockTTL      time.Duration
	ResponseCode int // KeyCompleted; default 201
	ResponseBody []byte
}

// Key seeds an idempotency key in state o.State, with the CREATED attempt
// that idempotency.Acquire inserts with every new key (a key row cannot
// exist without its attempt).
func Key(t testing.TB, pool *db.Pool, o KeyOpts) Seeded {
	t.Helper()
	if o.State == 0 {
		o.State = KeyLocked
	}
	return Attempt(t, pool, AttemptOpts{
		TenantID: o.TenantID, Key: o.Key, Fingerprint: o.Fingerprint, OrderID: o.OrderID,
		KeyState: o.State, LockTTL: o.LockTTL, ResponseCode: o.ResponseCode, ResponseBody: o.ResponseBody,
	})
}

// OutboxOpts describe an outbox row to seed.
type OutboxOpts struct {
	PaymentID string          // required: the attempt the event is about
	SubjectID string          // what it is once about; default PaymentID
	Type      string          // default attempts.EventPaymentSucceeded
	Payload   json.RawMessage // default {"id": PaymentID}
}

// Outbox seeds an outbox row through outbox.Enqueue (which also notifies
// the relays) and returns its event id. A final attempt seeded with Attempt
// has its PaymentSucceeded or PaymentFailed row already; this is for others.
func Outbox(t testing.TB, q db.DBTX, o OutboxOpts) string {
	t.Helper()
	if o.Type == "" {
		o.Type = attempts.EventPaymentSucceeded
	}
	if o.Payload == nil {
		b, err := json.Marshal(map[string]string{"id": o.PaymentID})
		if err != nil {
			t.Fatalf("testdb: outbox payload: %v", err)
		}
		o.Payload = b
	}
	if o.SubjectID == "" {
		o.SubjectID = o.PaymentID
	}
	id, err := outbox.Enqueue(seedContext(t), q, outbox.Event{Type: o.Type, SubjectID: o.SubjectID, PaymentID: o.PaymentID, Payload: o.Payload})
	if err != nil {
		t.Fatalf("testdb: seed outbox row: %v", err)
	}
	return id
}

// WebhookEventOpts describe a recorded webhook event to seed.
type WebhookEventOpts struct {
	EventID   string // default a random evt_ id
	Type      string // default "charge.succeeded"
	ChargeID  string // default a random ch_ id
	AttemptID string // the payment it named, if any
	Outcome   string // default "applied"
	Payload   json.RawMessage
}

// WebhookEvent seeds a webhook event as recorded under provider "sim",
// with SQL: the webhook package records an event only while applying it,
// and a test that seeds one wants it recorded without its effect (as if
// another pod had processed it). It returns the event id.
func WebhookEvent(t testing.TB, q db.DBTX, o WebhookEventOpts) string {
	t.Helper()
	if o.EventID == "" {
		o.EventID = testkit.RandomID("evt_")
	}
	if o.Type == "" {
		o.Type = "charge.succeeded"
	}
	if o.Outcome == "" {
		o.Outcome = "applied"
	}
	if o.Payload == nil {
		o.Payload = json.RawMessage(`{}`)
	}
	var attemptID *string
	if o.AttemptID != "" {
		attemptID = &o.AttemptID
	}
	_, err := q.Exec(seedContext(t), `INSERT INTO webhook_events (provider, event_id, type, charge_id, attempt_id, outcome, payload)
		VALUES ('sim', $1, $2, $3, $4, $5, $6)`, o.EventID, o.Type, o.ChargeID, attemptID, o.Outcome, o.Payload)
	if err != nil {
		t.Fatalf("testdb: seed webhook event: %v", err)
	}
	return o.EventID
}

// Anomaly seeds an anomaly through attempts.RecordAnomaly (once per
// DedupeKey, default a random one; Source defaults to webhook).
func Anomaly(t testing.TB, q db.DBTX, a attempts.Anomaly) {
	t.Helper()
	if a.Source == "" {
		a.Source = attempts.SourceWebhook
	}
	if a.DedupeKey == "" {
		a.DedupeKey = testkit.RandomID("fixture:")
	}
	if err := attempts.RecordAnomaly(seedContext(t), q, a); err != nil {
		t.Fatalf("testdb: seed anomaly: %v", err)
	}
}

// Operator seeds a console operator through operators.Create (email
// default a random one) and returns it with its password.
func Operator(t testing.TB, q db.DBTX, email string, role operators.Role) operators.Created {
	t.Helper()
	if email == "" {
		email = testkit.RandomID("op-") + "@example.com"
	}
	c, err := operators.Create(seedContext(t), q, email, role)
	if err != nil {
		t.Fatalf("testdb: seed operator: %v", err)
	}
	return c
}
