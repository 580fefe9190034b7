// Package provider talks to the payment provider: the Provider interface,
// the simulator's HTTP client, and the resilient wrapper (circuit breaker and
// jittered retries) that classifies every charge call into an Outcome that is
// never a guess.
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
}

// Charge is the provider's record of a charge.
type Charge struct {
	ID             string `json:"id"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Status         string `json:"status"` // "succeeded" or "failed"
	Reference      string `json:"reference"`
	IdempotencyKey string `json:"idempotency_key"`
	PaymentMethod  string `json:"payment_method,omitempty"`
	Created        int64  `json:"created"`
	Refunded       bool   `json:"refunded"`
	FailureCode    string `json:"failure_code,omitempty"`
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

// Charge statuses.
const (
	ChargeSucceeded = "succeeded"
	ChargeFailed    = "failed"
)

// RefundRequest is one refund of a charge. IdempotencyKey is derived from
// our refund, so the provider deduplicates every repeat of it.
type RefundRequest struct {
	ChargeID       string
	Amount         int64  // 0: the whole unrefunded rest of the charge
	Reference      string // our refund id; "" for none
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

// refusalCodes are the provider's answers to a refund that prove nothing was
// refunded and nothing will be under this request: it is FAILED, not unknown.
var refusalCodes = map[string]bool{
	"amount_too_large": true, "charge_not_refundable": true, "charge_already_refunded": true,
}

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

// Result is what a charge or refund call learned.
type Result struct {
	Outcome     Outcome
	Charge      *Charge // a charge call's, set for Succeeded and Declined
	Refund      *Refund // a refund call's, set for Succeeded
	DeclineCode string  // set for Declined (a refund's refusal code too)
	Tries       int     // HTTP calls made
	Err         error   // the last error, for Unknown and NotSent
}

// Provider is a payment provider.
type Provider interface {
	// Name is the provider's name as stored on attempts ("sim").
	Name() string
	// CreateCharge charges, deduplicated by req.IdempotencyKey.
	CreateCharge(ctx context.Context, req ChargeRequest) Result
	// ChargeByKey looks a charge up by the idempotency key it was created
	// with; ErrNotFound if the provider has none.
	ChargeByKey(ctx context.Context, key string) (Charge, error)
	// ListCharges returns one page of the charges created in [q.From, q.To),
	// ordered by creation then id.
	ListCharges(ctx context.Context, q ListQuery) (ChargePage, error)
	// CreateRefund refunds a charge, deduplicated by req.IdempotencyKey. A
	// refusal that proves nothing was refunded (amount too large, charge not
	// refundable) is Declined with the provider's code.
	CreateRefund(ctx context.Context, req RefundRequest) Result
	// RefundByKey looks a refund up by the idempotency key it was created
	// with; ErrNotFound if the provider has none.
	RefundByKey(ctx context.Context, key string) (Refund, error)
}
