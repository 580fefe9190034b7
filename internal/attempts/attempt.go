package attempts

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/ids"
	"github.com/acme/paymentsvc/internal/lifecycle"
)

// Capture methods: charged at once, or only authorized until a capture.
const (
	CaptureAutomatic = "automatic"
	CaptureManual    = "manual"
)

// Attempt is one payment attempt, the "payment" of the API.
type Attempt struct {
	ID               string
	TenantID         string
	OrderID          string
	IdempotencyKey   string
	Amount           int64
	Currency         string
	PaymentMethod    string
	Description      *string
	Metadata         map[string]string
	Status           Status
	Provider         *string  // the provider it is at; nil while none has been chosen
	Route            []string // the providers it may go to, in order, fixed at creation
	ProviderChargeID *string
	FailureCode      *string
	AmountReserved   int64 // the sum of its refunds that are not FAILED
	AmountRefunded   int64 // the sum of its SUCCEEDED refunds
	CaptureMethod    string
	AmountCaptured   int64      // what was charged, once SUCCEEDED
	CaptureBefore    *time.Time // the provider's deadline, while AUTHORIZED
	CanceledReason   *string    // once CANCELED: the void's reason, expired or voided_at_provider
	CheckCount       int
	NextCheckAt      *time.Time
	NeedsReview      bool
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// Payment is the attempt as clients and event consumers see it.
type Payment struct {
	ID               string            `json:"id"`
	TenantID         string            `json:"tenant_id,omitempty"`
	OrderID          string            `json:"order_id"`
	Amount           int64             `json:"amount"`
	Currency         string            `json:"currency"`
	Status           Status            `json:"status"`
	Provider         *string           `json:"provider"`
	ProviderChargeID *string           `json:"provider_charge_id"`
	FailureCode      *string           `json:"failure_code"`
	AmountRefunded   int64             `json:"amount_refunded"`
	AmountRefundable int64             `json:"amount_refundable"`
	CaptureMethod    string            `json:"capture_method"`
	AmountCapturable int64             `json:"amount_capturable"`
	AmountCaptured   int64             `json:"amount_captured"`
	CaptureBefore    *time.Time        `json:"capture_before"`
	CanceledReason   *string           `json:"canceled_reason"`
	Description      *string           `json:"description,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
	CreatedAt        time.Time         `json:"created_at"`
	UpdatedAt        time.Time         `json:"updated_at"`
}

// Public is the API view of the attempt (without tenant_id).
func (a Attempt) Public() Payment {
	p := Payment{
		ID: a.ID, OrderID: a.OrderID, Amount: a.Amount, Currency: a.Currency,
		Status: a.Status, Provider: a.Provider, ProviderChargeID: a.ProviderChargeID,
		FailureCode: a.FailureCode, AmountRefunded: a.AmountRefunded, AmountRefundable: a.Refundable(),
		CaptureMethod: a.captureMethod(), AmountCapturable: a.Capturable(), AmountCaptured: a.AmountCaptured,
		CanceledReason: a.CanceledReason, Description: a.Description, Metadata: a.Metadata,
		CreatedAt: a.CreatedAt.UTC().Truncate(time.Second), UpdatedAt: a.UpdatedAt.UTC().Truncate(time.Second),
	}
	if a.Status == Authorized && a.CaptureBefore != nil {
		cb := a.CaptureBefore.UTC().Truncate(time.Second)
		p.CaptureBefore = &cb
	}
	return p
}

// Manual reports whether the payment is only authorized until a capture.
func (a Attempt) Manual() bool { return a.CaptureMethod == CaptureManual }

// captureMethod is the payment's capture method, automatic if unset.
func (a Attempt) captureMethod() string {
	if a.Manual() {
		return CaptureManual
	}
	return CaptureAutomatic
}

// Machine is the state machine the payment moves along.
func (a Attempt) Machine() lifecycle.Machine {
	if a.Manual() {
		return lifecycle.Manual
	}
	return lifecycle.Operation
}

// Capturable is what a capture may take of the payment: its amount while
// AUTHORIZED, else 0.
func (a Attempt) Capturable() int64 {
	if a.Status != Authorized {
		return 0
	}
	return a.Amount
}

// ProviderName is the provider the attempt is at, "" while none is chosen.
func (a Attempt) ProviderName() string {
	if a.Provider == nil {
		return ""
	}
	return *a.Provider
}

// Refundable is what refunds may still take of the payment: what it
// captured minus its refunds that are not FAILED, once SUCCEEDED; 0 before.
func (a Attempt) Refundable() int64 {
	if a.Status != Succeeded {
		return 0
	}
	return a.AmountCaptured - a.AmountReserved
}

// ProviderKey is the idempotency key sent to the provider for attempt id:
// stable across every retry of the intent, distinct for every attempt.
func ProviderKey(attemptID string) string { return "psvc_" + attemptID }

// IDOfProviderKey is the attempt id a ProviderKey names ("" when key is
// not one of ours).
func IDOfProviderKey(key string) string {
	id, ok := strings.CutPrefix(key, "psvc_pay_")
	if !ok || id == "" {
		return ""
	}
	return "pay_" + id
}

// NewID returns a fresh attempt id.
func NewID() string { return ids.New("pay_", 12) }

// fromRow converts a database row; generated types stop here.
func fromRow(r db.PaymentAttempt) Attempt {
	a := Attempt{
		ID: r.ID, TenantID: r.TenantID, OrderID: r.OrderID, IdempotencyKey: r.IdempotencyKey,
		Amount: r.Amount, Currency: r.Currency, PaymentMethod: r.PaymentMethod,
		Description: r.Description, Status: Status(r.Status), Provider: r.Provider, Route: r.Route,
		ProviderChargeID: r.ProviderChargeID, FailureCode: r.FailureCode,
		AmountReserved: r.AmountReserved, AmountRefunded: r.AmountRefunded,
		CaptureMethod: r.CaptureMethod, AmountCaptured: r.AmountCaptured, CaptureBefore: r.CaptureBefore,
		CanceledReason: r.CanceledReason,
		CheckCount:     int(r.CheckCount), NextCheckAt: r.NextCheckAt, NeedsReview: r.NeedsReview,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if len(r.Metadata) > 0 {
		_ = json.Unmarshal(r.Metadata, &a.Metadata)
	}
	return a
}
