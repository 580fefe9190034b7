package apperr

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// statusOf is the one map from error codes to HTTP statuses.
var statusOf = map[Code]int{
	Unauthorized:             http.StatusUnauthorized,
	InvalidSignature:         http.StatusUnauthorized,
	InvalidRequest:           http.StatusBadRequest,
	UnsupportedMediaType:     http.StatusUnsupportedMediaType,
	PayloadTooLarge:          http.StatusRequestEntityTooLarge,
	IdempotencyKeyMissing:    http.StatusBadRequest,
	IdempotencyKeyInvalid:    http.StatusBadRequest,
	IdempotencyKeyInUse:      http.StatusConflict,
	IdempotencyKeyReused:     http.StatusUnprocessableEntity,
	OrderAlreadyHasPay:       http.StatusConflict,
	ProviderUnavailable:      http.StatusServiceUnavailable,
	DatabaseUnavailable:      http.StatusServiceUnavailable,
	PaymentNotFound:          http.StatusNotFound,
	PaymentNotRefundable:     http.StatusConflict,
	RefundExceeds:            http.StatusUnprocessableEntity,
	RefundNotFound:           http.StatusNotFound,
	PaymentNotCapturable:     http.StatusConflict,
	PaymentNotVoidable:       http.StatusConflict,
	CaptureExceeds:           http.StatusUnprocessableEntity,
	CaptureNotFound:          http.StatusNotFound,
	VoidNotFound:             http.StatusNotFound,
	RateLimited:              http.StatusTooManyRequests,
	NotFound:                 http.StatusNotFound,
	MethodNotAllowed:         http.StatusMethodNotAllowed,
	Internal:                 http.StatusInternalServerError,
	WebhookEndpointNotFound:  http.StatusNotFound,
	WebhookDeliveryNotFound:  http.StatusNotFound,
	WebhookDeliveryDelivered: http.StatusConflict,
}

// HTTPStatus is the status that answers code.
func (c Code) HTTPStatus() int {
	if s, ok := statusOf[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Problem is an RFC 9457 problem details body.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail"`
	Code      string `json:"code"`
	PaymentID string `json:"payment_id,omitempty"`
}

// Write answers e as application/problem+json, with Retry-After when e
// carries one.
func Write(w http.ResponseWriter, e *Error) {
	status := e.Code.HTTPStatus()
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Problem{
		Type:      "https://paymentsvc.example/problems/" + string(e.Code),
		Title:     http.StatusText(status),
		Status:    status,
		Detail:    e.Detail,
		Code:      string(e.Code),
		PaymentID: e.PaymentID,
	})
}
