// Package provider talks to the payment providers: the Caller and Provider
// interfaces, and the resilient wrapper (circuit breaker and jittered
// retries) that classifies every call into an Outcome that is never a guess.
// Each provider's API is a connector in a folder of its own below this one
// (sim: the simulator's API; stripe: Stripe's).
package provider

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is a lookup the provider answered with "no such charge" (or
// refund).
var ErrNotFound = errors.New("provider: charge not found")

// ErrUnavailable is a call refused before anything was sent (breaker open).
var ErrUnavailable = errors.New("provider: unavailable")

// ChargeRequest is one charge. IdempotencyKey is derived from our attempt, so
// the provider deduplicates every repeat of it.
type ChargeRequest struct {
	Amount         int64
	Currency       string
	PaymentMethod  string
	Reference      string // our payment id
	IdempotencyKey string
	// Manual only authorizes (holds) the amount: the charge is
	// ChargeAuthorized until it is captured, voided or expires.
	Manual bool
}

// Charge is the provider's record of a charge.
type Charge struct {
	ID             string `json:"id"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Status         string `json:"status"` // one of the Charge* statuses
	Reference      string `json:"reference"`
	IdempotencyKey string `json:"idempotency_key"`
	PaymentMethod  string `json:"payment_method,omitempty"`
	Created        int64  `json:"created"`
	Refunded       bool   `json:"refunded"`
	FailureCode    string `json:"failure_code,omitempty"`
	// Captured is true once money moved (a succeeded charge);
	// AmountCaptured is how much.
	Captured       bool  `json:"captured"`
	AmountCaptured int64 `json:"amount_captured"`
	// AmountCapturable is what an authorized charge holds.
	AmountCapturable int64 `json:"amount_capturable"`
	// CaptureBefore is an authorization's deadline (unix seconds); 0 if
	// none is known.
	CaptureBefore int64 `json:"capture_before,omitempty"`
	// CaptureKey and VoidKey are the idempotency keys that captured or
	// voided the charge, when the provider tells ("" otherwise).
	CaptureKey string `json:"capture_key,omitempty"`
	VoidKey    string `json:"void_key,omitempty"`
	// Foreign marks a listed charge that carries no reference of ours (made
	// by another system on a shared provider account): settlement counts it
	// and never touches it.
	Foreign bool `json:"-"`
}

// MovedMoney reports whether the charge took money from the customer: a
// succeeded charge (captured at once, or later). An authorized, voided,
// expired or failed one moved none.
func (c Charge) MovedMoney() bool { return c.Status == ChargeSucceeded }

// CapturedAmount is what the charge took: AmountCaptured, or for a
// provider that does not report it on a succeeded charge, the amount.
func (c Charge) CapturedAmount() int64 {
	switch {
	case c.Status != ChargeSucceeded:
		return 0
	case c.AmountCaptured > 0:
		return c.AmountCaptured
	}
	return c.Amount
}

// Lookup names one step of ours (a charge, refund, capture or void) whose
// answer was lost, with all a connector may need to find it exactly and
// read-after-write: providers without a lookup by idempotency key find it by
// an id stored before the money moved, or by listing and matching our
// reference. Never by a search that may lag.
type Lookup struct {
	Key       string    // the idempotency key the step was sent with
	Reference string    // our id of the step: the payment's, refund's, capture's or void's
	ChargeID  string    // the payment's charge at the provider, when known
	Since     time.Time // when the step was created: nothing of it at the provider is older
}

// ListQuery asks for a page of the charges created in [From, To): at most
// Limit of them, after the charge with id After ("" for the first page).
type ListQuery struct {
	From, To time.Time
	After    string
	Limit    int
}

// ChargePage is one page of charges; HasMore says another follows.
type ChargePage struct {
	Data    []Charge
	HasMore bool
}

// Charge statuses: what a connector reports, whatever its provider calls
// them. A charge made with ChargeRequest.Manual is authorized until it is
// captured (succeeded), voided or expired.
const (
	ChargeSucceeded  = "succeeded"
	ChargeFailed     = "failed"
	ChargeAuthorized = "authorized"
	ChargeVoided     = "voided"
	ChargeExpired    = "expired"
)

// CaptureRequest captures an authorized charge. IdempotencyKey is derived
// from our capture, so the provider deduplicates every repeat of it.
type CaptureRequest struct {
	ChargeID       string
	Amount         int64  // 0: all that is held
	Reference      string // our capture id
	IdempotencyKey string
}

// VoidRequest releases an authorized charge, like CaptureRequest.
type VoidRequest struct {
	ChargeID       string
	Reference      string // our void id
	Reason         string // the void's reason, "" for none
	IdempotencyKey string
}

// Hold is the provider's record of a capture or void of a charge: what
// looking it up by its key finds. A void has no amount.
type Hold struct {
	Charge         string `json:"charge"`
	Amount         int64  `json:"amount,omitempty"`
	Reference      string `json:"reference,omitempty"`
	IdempotencyKey string `json:"idempotency_key"`
	Created        int64  `json:"created,omitempty"`
}

// RefundRequest is one refund of a charge. IdempotencyKey is derived from
// our refund, so the provider deduplicates every repeat of it.
type RefundRequest struct {
	ChargeID       string
	Amount         int64  // 0: the whole unrefunded rest of the charge
	Reference      string // our refund id; "" for none
	Reason         string // the refund's reason, "" for none
	IdempotencyKey string
}

// Refund is the provider's record of a refund.
type Refund struct {
	ID             string `json:"id"`
	Charge         string `json:"charge"`
	Amount         int64  `json:"amount"`
	Status         string `json:"status"`
	Reference      string `json:"reference,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Created        int64  `json:"created,omitempty"`
}

// Refund statuses.
const RefundSucceeded = "succeeded"

// Refusal codes: the provider's answers to a refund, capture or void that
// prove nothing was done and nothing will be under this request: it is
// Declined (FAILED), not unknown.
const (
	CodeAmountTooLarge        = "amount_too_large"
	CodeChargeAlreadyCaptured = "charge_already_captured"
	CodeChargeNotCapturable   = "charge_not_capturable"
	CodeAuthorizationExpired  = "authorization_expired"
)

var (
	refundRefusals = map[string]bool{
		CodeAmountTooLarge: true, "charge_not_refundable": true, "charge_already_refunded": true,
	}
	holdRefusals = map[string]bool{
		CodeAmountTooLarge: true, CodeChargeAlreadyCaptured: true, CodeChargeNotCapturable: true, CodeAuthorizationExpired: true,
	}
)

// Outcome classifies a charge call.
type Outcome int

// The outcomes of a charge call.
const (
	// NotSent: nothing reached the provider (breaker open); nothing was charged.
	NotSent Outcome = iota
	// Succeeded: the provider answered with a succeeded charge.
	Succeeded
	// Declined: the provider answered with a failed charge (e.g. card_declined).
	Declined
	// Unknown: the call may or may not have charged (timeout, reset after
	// sending, 5xx, lost response, retry budget spent). Never a failure.
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case NotSent:
		return "not_sent"
	case Succeeded:
		return "succeeded"
	case Declined:
		return "declined"
	case Unknown:
		return "unknown"
	}
	return "invalid"
}

// Result is what a charge, refund, capture or void call learned.
type Result struct {
	Outcome     Outcome
	Charge      *Charge // a charge call's, set for Succeeded and Declined; a capture's or void's for Succeeded
	Refund      *Refund // a refund call's, set for Succeeded
	DeclineCode string  // set for Declined (a refund's refusal code too)
	Tries       int     // HTTP calls made
	Err         error   // the last error, for Unknown and NotSent
	// Anomaly is what a connector flagged on the last call (CallError.Anomaly),
	// for the caller to record; "" for none.
	Anomaly string
	// Rejected, for Declined: the provider refused the request itself and
	// nothing of ours was found (CallError.Rejected). It proves nothing was
	// made only when no earlier request may have sent the same step: the
	// caller treats it as Unknown otherwise.
	Rejected bool
}

// Provider is a payment provider.
type Provider interface {
	// Name is the provider's name as stored on attempts ("sim").
	Name() string
	// CreateCharge charges, deduplicated by req.IdempotencyKey.
	CreateCharge(ctx context.Context, req ChargeRequest) Result
	// FindCharge looks up the charge a payment's step made (l.Key, the
	// payment's idempotency key; l.Reference, its id); ErrNotFound if the
	// provider has none.
	FindCharge(ctx context.Context, l Lookup) (Charge, error)
	// ListCharges returns one page of the charges created in [q.From, q.To),
	// ordered by creation then id.
	ListCharges(ctx context.Context, q ListQuery) (ChargePage, error)
	// CreateRefund refunds a charge, deduplicated by req.IdempotencyKey. A
	// refusal that proves nothing was refunded (amount too large, charge not
	// refundable) is Declined with the provider's code.
	CreateRefund(ctx context.Context, req RefundRequest) Result
	// FindRefund looks up the refund a step made (l.ChargeID: the charge
	// refunded); ErrNotFound if the provider has none.
	FindRefund(ctx context.Context, l Lookup) (Refund, error)
	// CaptureCharge captures an authorized charge, deduplicated by
	// req.IdempotencyKey: Succeeded with the charge as captured, or
	// Declined with the provider's refusal code (CodeAmountTooLarge,
	// CodeChargeAlreadyCaptured, CodeChargeNotCapturable,
	// CodeAuthorizationExpired); anything ambiguous is Unknown.
	CaptureCharge(ctx context.Context, req CaptureRequest) Result
	// VoidCharge releases an authorized charge, like CaptureCharge.
	VoidCharge(ctx context.Context, req VoidRequest) Result
	// GetCharge reads a charge by its id, as it is now (an authorization
	// that expired reads ChargeExpired); ErrNotFound if there is none.
	GetCharge(ctx context.Context, id string) (Charge, error)
	// FindCapture and FindVoid look up the capture or void a step made of
	// charge l.ChargeID; ErrNotFound if the provider has none.
	FindCapture(ctx context.Context, l Lookup) (Hold, error)
	FindVoid(ctx context.Context, l Lookup) (Hold, error)
}
