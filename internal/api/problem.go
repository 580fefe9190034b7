package api

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/acme/paymentsvc/internal/apperr"
)

// statusOf is the one map from error codes to HTTP statuses.
var statusOf = map[apperr.Code]int{
	apperr.Unauthorized:          http.StatusUnauthorized,
	apperr.InvalidRequest:        http.StatusBadRequest,
	apperr.UnsupportedMediaType:  http.StatusUnsupportedMediaType,
	apperr.PayloadTooLarge:       http.StatusRequestEntityTooLarge,
	apperr.IdempotencyKeyMissing: http.StatusBadRequest,
	apperr.IdempotencyKeyInvalid: http.StatusBadRequest,
	apperr.IdempotencyKeyInUse:   http.StatusConflict,
	apperr.IdempotencyKeyReused:  http.StatusUnprocessableEntity,
	apperr.OrderAlreadyHasPay:    http.StatusConflict,
	apperr.ProviderUnavailable:   http.StatusServiceUnavailable,
	apperr.PaymentNotFound:       http.StatusNotFound,
	apperr.NotFound:              http.StatusNotFound,
	apperr.MethodNotAllowed:      http.StatusMethodNotAllowed,
	apperr.Internal:              http.StatusInternalServerError,
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

// writeError answers err as problem+json. Internal errors are logged with
// their text and answered with a generic detail.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := apperr.As(err)
	if e.Code == apperr.Internal {
		s.log.ErrorContext(r.Context(), "request failed", "request_id", requestID(r.Context()), "err", err)
	}
	status, ok := statusOf[e.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	writeProblem(w, status, e)
}

func writeProblem(w http.ResponseWriter, status int, e *apperr.Error) {
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

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
