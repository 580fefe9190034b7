// Package apperr is the one application error type: a code that clients can
// rely on, a detail that is safe to show them, and the few extra fields some
// codes carry; and, in http.go, the one map from codes to HTTP statuses and
// the problem+json writer that the API and the webhook endpoint share.
package apperr

import (
	"errors"
	"fmt"
)

// Code is a stable, snake_case error code sent to clients.
type Code string

// The codes of the API.
const (
	Unauthorized             Code = "unauthorized"
	InvalidSignature         Code = "invalid_signature"
	InvalidRequest           Code = "invalid_request"
	UnsupportedMediaType     Code = "unsupported_media_type"
	PayloadTooLarge          Code = "payload_too_large"
	IdempotencyKeyMissing    Code = "idempotency_key_missing"
	IdempotencyKeyInvalid    Code = "idempotency_key_invalid"
	IdempotencyKeyInUse      Code = "idempotency_key_in_use"
	IdempotencyKeyReused     Code = "idempotency_key_reused"
	OrderAlreadyHasPay       Code = "order_already_has_payment"
	ProviderUnavailable      Code = "provider_unavailable"
	DatabaseUnavailable      Code = "database_unavailable"
	PaymentNotFound          Code = "payment_not_found"
	PaymentNotRefundable     Code = "payment_not_refundable"
	RefundExceeds            Code = "refund_exceeds_refundable"
	RefundNotFound           Code = "refund_not_found"
	PaymentNotCapturable     Code = "payment_not_capturable"
	PaymentNotVoidable       Code = "payment_not_voidable"
	CaptureExceeds           Code = "capture_exceeds_authorized"
	CaptureNotFound          Code = "capture_not_found"
	VoidNotFound             Code = "void_not_found"
	RateLimited              Code = "rate_limited"
	NotFound                 Code = "not_found"
	MethodNotAllowed         Code = "method_not_allowed"
	Internal                 Code = "internal_error"
	WebhookEndpointNotFound  Code = "webhook_endpoint_not_found"
	WebhookDeliveryNotFound  Code = "webhook_delivery_not_found"
	WebhookDeliveryDelivered Code = "webhook_delivery_delivered"
)

// Error is an application error.
type Error struct {
	Code       Code
	Detail     string // safe to show a client
	RetryAfter int    // seconds, for in_use, rate_limited and the *_unavailable codes
	PaymentID  string // for order_already_has_payment
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Detail) }

// New returns an error with code and a client-safe detail.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// DatabaseRetryAfter is the Retry-After of database_unavailable: a
// connection lost or a failover takes seconds.
const DatabaseRetryAfter = 2

// NewDatabaseUnavailable is the answer to a request the database could not
// serve. Its detail never says that nothing was done: the request may have
// charged and failed only to record it (a failed COMMIT is not "not done").
func NewDatabaseUnavailable() *Error {
	return &Error{
		Code: DatabaseUnavailable,
		Detail: "the database is unavailable; retry after Retry-After seconds (what this request did is not known yet; " +
			"a payment retried with the same Idempotency-Key is never charged twice)",
		RetryAfter: DatabaseRetryAfter,
	}
}

// As returns the *Error in err's chain, or an internal error for anything
// else (whose text is logged, never sent).
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: Internal, Detail: "internal error"}
}
