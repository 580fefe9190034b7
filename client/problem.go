package client

import (
	"errors"
	"fmt"
	"time"
)

// Code is a problem's stable, machine-readable error code. The server may
// add codes; a Code not listed here is still reported as it came.
type Code string

// The problem codes of the API.
const (
	CodeUnauthorized            Code = "unauthorized"               // 401: missing or unknown API key
	CodeInvalidRequest          Code = "invalid_request"            // 400: Detail names the field
	CodeUnsupportedMediaType    Code = "unsupported_media_type"     // 415
	CodePayloadTooLarge         Code = "payload_too_large"          // 413
	CodeIdempotencyKeyMissing   Code = "idempotency_key_missing"    // 400
	CodeIdempotencyKeyInvalid   Code = "idempotency_key_invalid"    // 400: not 1–255 visible ASCII characters
	CodeIdempotencyKeyInUse     Code = "idempotency_key_in_use"     // 409: retried after Retry-After
	CodeIdempotencyKeyReused    Code = "idempotency_key_reused"     // 422: the key belongs to another request
	CodeOrderAlreadyHasPayment  Code = "order_already_has_payment"  // 409: Problem.PaymentID names it
	CodeProviderUnavailable     Code = "provider_unavailable"       // 503: nothing charged; retried
	CodeDatabaseUnavailable     Code = "database_unavailable"       // 503: retried
	CodePaymentNotFound         Code = "payment_not_found"          // 404
	CodePaymentNotRefundable    Code = "payment_not_refundable"     // 409: the payment is not SUCCEEDED
	CodeRefundExceedsRefundable Code = "refund_exceeds_refundable"  // 422: Detail says the rest
	CodeRefundNotFound          Code = "refund_not_found"           // 404
	CodePaymentNotCapturable    Code = "payment_not_capturable"     // 409: not AUTHORIZED, or already captured or voided
	CodePaymentNotVoidable      Code = "payment_not_voidable"       // 409: not AUTHORIZED, or already captured or voided
	CodeCaptureExceeds          Code = "capture_exceeds_authorized" // 422: Detail says what is held
	CodeCaptureNotFound         Code = "capture_not_found"          // 404
	CodeVoidNotFound            Code = "void_not_found"             // 404
	CodeRateLimited             Code = "rate_limited"               // 429: retried after Retry-After
	CodeNotFound                Code = "not_found"                  // 404: no such endpoint
	CodeMethodNotAllowed        Code = "method_not_allowed"         // 405
	CodeInvalidSignature        Code = "invalid_signature"          // 401: webhooks only
	CodeInternalError           Code = "internal_error"             // 500: retried
	// The merchant webhooks' API (docs/webhooks.md).
	CodeWebhookEndpointNotFound  Code = "webhook_endpoint_not_found" // 404
	CodeWebhookDeliveryNotFound  Code = "webhook_delivery_not_found" // 404
	CodeWebhookDeliveryDelivered Code = "webhook_delivery_delivered" // 409: a retry of a delivered delivery
)

// Problem is a refusal by the service: an RFC 9457 problem document. Only
// refusals that cannot change by retrying reach the caller as a Problem
// (400, 401, 404, 409 other than idempotency_key_in_use, 413, 415, 422);
// the others are retried, and the last one seen is NotFinalError.Last when
// the call gives up.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"` // the HTTP status
	Detail    string `json:"detail"` // for humans; may change
	Code      Code   `json:"code"`
	PaymentID string `json:"payment_id,omitempty"` // with CodeOrderAlreadyHasPayment: the order's payment

	RetryAfter     time.Duration `json:"-"` // the Retry-After header; 0 when absent
	RequestID      string        `json:"-"` // the X-Request-Id the service logged the request under
	IdempotencyKey string        `json:"-"` // the key the refused request carried, if any
}

func (p *Problem) Error() string {
	s := fmt.Sprintf("paymentsvc: %d %s: %s", p.Status, p.Code, p.Detail)
	if p.PaymentID != "" {
		s += " (payment " + p.PaymentID + ")"
	}
	return s
}

// CodeOf returns the code of the refusal err is, or "" if it is none. A
// *NotFinalError is no refusal even when its last try was a retried
// problem (409 idempotency_key_in_use, 503): CodeOf returns "" for it, and
// CodeOf(e.Last) that problem's code.
func CodeOf(err error) Code {
	if _, ok := errors.AsType[*NotFinalError](err); ok {
		return ""
	}
	if p, ok := errors.AsType[*Problem](err); ok {
		return p.Code
	}
	return ""
}
