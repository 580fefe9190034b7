package client

import "time"

// The JSON tags below follow one rule that the spec test (spec_test.go)
// enforces against api/openapi.yaml: a field without omitempty is required
// by the schema and one with it is optional; a pointer is a field the schema
// lets be null. Fields the server adds later are ignored when decoding.

// Status is the state of a payment, a refund, a capture or a void.
// SUCCEEDED, FAILED and CANCELED are final; nothing moves anything out of
// them.
type Status string

// The statuses of payments and of the operations on them (refunds,
// captures and voids take the first five only).
const (
	StatusCreated    Status = "CREATED"    // recorded; the provider was not called yet
	StatusPending    Status = "PENDING"    // about to call, or calling, the provider
	StatusSucceeded  Status = "SUCCEEDED"  // charged (or refunded, captured, voided): final
	StatusFailed     Status = "FAILED"     // declined, refused or never sent: final
	StatusUnknown    Status = "UNKNOWN"    // the provider's answer is not known yet; never assumed failed
	StatusAuthorized Status = "AUTHORIZED" // a manual payment held at the provider, to capture or void
	StatusCanceled   Status = "CANCELED"   // a manual payment voided or expired, no money moved: final
)

// Final reports whether s is SUCCEEDED, FAILED or CANCELED.
func (s Status) Final() bool { return s == StatusSucceeded || s == StatusFailed || s == StatusCanceled }

// Answered reports whether s answers a create for good: a final status, or
// AUTHORIZED (a manual payment's create is done once it is held).
func (s Status) Answered() bool { return s.Final() || s == StatusAuthorized }

// CaptureMethod says when a payment's money moves.
type CaptureMethod string

// The capture methods.
const (
	CaptureAutomatic CaptureMethod = "automatic" // charged at once (the default)
	CaptureManual    CaptureMethod = "manual"    // only authorized; captured or voided later
)

// CreatePaymentRequest is the body of POST /v1/payments.
type CreatePaymentRequest struct {
	OrderID       string            `json:"order_id"`              // 1–64 characters; an order holds at most one payment that is not FAILED
	Amount        int64             `json:"amount"`                // positive, in the currency's minor unit (cents for USD)
	Currency      string            `json:"currency"`              // ISO 4217, upper case: "USD"
	PaymentMethod string            `json:"payment_method"`        // the provider's token: "pm_card_visa"
	Description   string            `json:"description,omitempty"` // free text, returned as given
	Metadata      map[string]string `json:"metadata,omitempty"`    // free-form, returned as given
	// CaptureMethod is "" (automatic) or CaptureManual. It is part of the
	// request as sent: leaving it out and CaptureAutomatic spelled out are
	// different requests under one key.
	CaptureMethod CaptureMethod `json:"capture_method,omitempty"`
}

// Payment is a payment as the service reports it.
type Payment struct {
	ID               string            `json:"id"` // "pay_…"
	OrderID          string            `json:"order_id"`
	Amount           int64             `json:"amount"`
	Currency         string            `json:"currency"`
	Status           Status            `json:"status"`
	Provider         *string           `json:"provider"`           // the provider it went to; nil while none has been chosen
	ProviderChargeID *string           `json:"provider_charge_id"` // the provider's charge id once known
	FailureCode      *string           `json:"failure_code"`       // why a FAILED payment failed: "card_declined", "abandoned", …
	AmountRefunded   int64             `json:"amount_refunded"`    // the sum of its SUCCEEDED refunds
	AmountRefundable int64             `json:"amount_refundable"`  // what refunds may still take
	CaptureMethod    CaptureMethod     `json:"capture_method"`
	AmountCapturable int64             `json:"amount_capturable"` // what a capture may take while AUTHORIZED
	AmountCaptured   int64             `json:"amount_captured"`   // what was charged, once SUCCEEDED
	CaptureBefore    *time.Time        `json:"capture_before"`    // the provider's deadline while AUTHORIZED
	CanceledReason   *string           `json:"canceled_reason"`   // once CANCELED: the void's reason, "expired", "voided_at_provider"
	Description      string            `json:"description,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
	CreatedAt        time.Time         `json:"created_at"`
	UpdatedAt        time.Time         `json:"updated_at"`
}

// PaymentList is one page of payments, newest first.
type PaymentList struct {
	Data    []Payment `json:"data"`
	HasMore bool      `json:"has_more"` // more follow; ask with StartingAfter = the last one's ID
}

// ListPaymentsParams select the payments of ListPayments and ListPaymentsPage.
type ListPaymentsParams struct {
	OrderID       string `query:"order_id"`       // only this order's payments; "" for all
	Limit         int    `query:"limit"`          // page size, 1–100; 0 for the server's default (ListPayments uses 100)
	StartingAfter string `query:"starting_after"` // the ID of the last payment seen; "" for the newest
}

// RefundReason says why a payment is refunded.
type RefundReason string

// The reasons a refund may give.
const (
	ReasonDuplicate           RefundReason = "duplicate"
	ReasonFraudulent          RefundReason = "fraudulent"
	ReasonRequestedByCustomer RefundReason = "requested_by_customer"
	ReasonOther               RefundReason = "other"
)

// CreateRefundRequest is the body of POST /v1/payments/{id}/refunds. The
// zero value refunds the payment's whole refundable rest.
type CreateRefundRequest struct {
	// Amount is how much to refund in minor units; nil refunds the whole
	// rest. A pointer, so that a computed 0 is refused by the server instead
	// of silently meaning "everything": new(int64(200)).
	Amount   *int64            `json:"amount,omitempty"`
	Reason   RefundReason      `json:"reason,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Refund is a refund of a payment, in full or in part.
type Refund struct {
	ID               string            `json:"id"`         // "rfd_…"
	PaymentID        string            `json:"payment_id"` // the refunded payment
	Amount           int64             `json:"amount"`
	Currency         string            `json:"currency"`
	Status           Status            `json:"status"`
	Provider         string            `json:"provider"`
	ProviderRefundID *string           `json:"provider_refund_id"` // the provider's refund id once known
	FailureCode      *string           `json:"failure_code"`
	Reason           *RefundReason     `json:"reason"`
	Metadata         map[string]string `json:"metadata"`
	CreatedAt        time.Time         `json:"created_at"`
	UpdatedAt        time.Time         `json:"updated_at"`
}

// RefundList is one page of a payment's refunds, newest first.
type RefundList struct {
	Data    []Refund `json:"data"`
	HasMore bool     `json:"has_more"`
}

// ListRefundsParams page through a payment's refunds.
type ListRefundsParams struct {
	Limit         int    `query:"limit"`          // page size, 1–100; 0 for the server's default (ListRefunds uses 100)
	StartingAfter string `query:"starting_after"` // the ID of the last refund seen
}

// Routing is a tenant's routing rules: a payment takes the first rule whose
// Currency matches (a rule without one matches all) and goes to the first
// provider of its list that is available.
type Routing struct {
	Rules []RoutingRule `json:"rules"`
}

// RoutingRule sends the payments in Currency (all, when "") to Providers, in order.
type RoutingRule struct {
	Currency  string   `json:"currency,omitempty"`
	Providers []string `json:"providers"`
}

// CreateCaptureRequest is the body of POST /v1/payments/{id}/captures. The
// zero value captures all that is authorized.
type CreateCaptureRequest struct {
	// Amount is how much to capture in minor units; nil captures all. A
	// pointer, so that a computed 0 is refused rather than meaning "all".
	Amount *int64 `json:"amount,omitempty"`
}

// VoidReason says why an authorization is voided.
type VoidReason string

// The reasons a void may give.
const (
	VoidDuplicate           VoidReason = "duplicate"
	VoidFraudulent          VoidReason = "fraudulent"
	VoidRequestedByCustomer VoidReason = "requested_by_customer"
	VoidAbandoned           VoidReason = "abandoned"
)

// CreateVoidRequest is the body of POST /v1/payments/{id}/voids.
type CreateVoidRequest struct {
	Reason VoidReason `json:"reason,omitempty"`
}

// Capture is a capture of an AUTHORIZED payment.
type Capture struct {
	ID          string    `json:"id"`         // "cap_…"
	PaymentID   string    `json:"payment_id"` // the captured payment
	Amount      int64     `json:"amount"`
	Currency    string    `json:"currency"`
	Status      Status    `json:"status"`
	Provider    string    `json:"provider"`
	FailureCode *string   `json:"failure_code"` // "authorization_expired", …
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// Void is a void of an AUTHORIZED payment.
type Void struct {
	ID          string      `json:"id"`         // "void_…"
	PaymentID   string      `json:"payment_id"` // the voided payment
	Status      Status      `json:"status"`
	Reason      *VoidReason `json:"reason"`
	Provider    string      `json:"provider"`
	FailureCode *string     `json:"failure_code"`
	CreatedAt   time.Time   `json:"created_at"`
	UpdatedAt   time.Time   `json:"updated_at"`
}
