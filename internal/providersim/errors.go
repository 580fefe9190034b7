package providersim

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
)

// Error codes the provider API answers with.
const (
	codeUnauthorized           = "unauthorized"
	codeInvalidRequest         = "invalid_request"
	codeIdempotencyKeyMissing  = "idempotency_key_missing"
	codeIdempotencyError       = "idempotency_error"
	codeResourceMissing        = "resource_missing"
	codeCardDeclined           = "card_declined"
	codeChargeNotRefundable    = "charge_not_refundable"
	codeAmountTooLarge         = "amount_too_large"
	codeChargeAlreadyCaptured  = "charge_already_captured"
	codeChargeNotCapturable    = "charge_not_capturable"
	codeAuthorizationExpired   = "authorization_expired"
	codeSimulatedFault         = "simulated_fault"
	codeInternalError          = "internal_error"
	defaultFaultStatus         = http.StatusServiceUnavailable
	defaultInternalErrorStatus = http.StatusInternalServerError
)

// codeStatus is the one place a fixed error code is mapped to its HTTP status;
// the fault error is the exception, its status is configured.
var codeStatus = map[string]int{
	codeUnauthorized:          http.StatusUnauthorized,
	codeInvalidRequest:        http.StatusBadRequest,
	codeIdempotencyKeyMissing: http.StatusBadRequest,
	codeIdempotencyError:      http.StatusBadRequest,
	codeResourceMissing:       http.StatusNotFound,
	codeCardDeclined:          http.StatusPaymentRequired,
	codeChargeNotRefundable:   http.StatusBadRequest,
	codeAmountTooLarge:        http.StatusBadRequest,
	codeChargeAlreadyCaptured: http.StatusBadRequest,
	codeChargeNotCapturable:   http.StatusBadRequest,
	codeAuthorizationExpired:  http.StatusBadRequest,
	codeInternalError:         defaultInternalErrorStatus,
}

// apiError is an error the client is meant to see.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

// errorf builds an apiError whose status comes from codeStatus.
func errorf(code, message string) *apiError {
	status, ok := codeStatus[code]
	if !ok {
		status = defaultInternalErrorStatus
	}
	return &apiError{status: status, code: code, message: message}
}

// errorBody is the JSON shape of every error: {"error":{"code":…,"message":…}}.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) body() map[string]any {
	return map[string]any{"error": errorBody{Code: e.code, Message: e.message}}
}

// writeJSON answers status with v encoded as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own types are encoded here; failing is a programming error.
		panic(err)
	}
	writeRaw(w, status, b)
}

// writeRaw answers status with an already encoded JSON body (a stored answer).
func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
	_, _ = w.Write([]byte("\n"))
}

// writeError answers err: an apiError as itself, anything else as a 500 whose
// detail is logged and never sent.
func writeError(w http.ResponseWriter, log *slog.Logger, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		log.Error("internal error", "err", err)
		ae = errorf(codeInternalError, "the simulator failed; see its log")
	}
	writeJSON(w, ae.status, ae.body())
}
