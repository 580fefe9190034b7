package providersim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Header names of the provider API.
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerReplayed       = "Idempotent-Replayed"
)

// maxBodyBytes bounds a request body; real ones are a few hundred bytes.
const maxBodyBytes = 64 << 10

// idempotencyKey returns the request's Idempotency-Key or an apiError.
func idempotencyKey(r *http.Request) (string, error) {
	key := r.Header.Get(headerIdempotencyKey)
	if key == "" {
		return "", errorf(codeIdempotencyKeyMissing, "the Idempotency-Key header is required")
	}
	return key, nil
}

// decodeBody parses a JSON body into v. Unknown fields are tolerated, as a
// real provider tolerates parameters it does not use; trailing data is not.
func decodeBody(r *http.Request, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBodyBytes))
	if err != nil {
		return errorf(codeInvalidRequest, fmt.Sprintf("reading body: %v", err))
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errorf(codeInvalidRequest, fmt.Sprintf("body is not valid JSON for this request: %v", err))
	}
	return nil
}

// serveCreate is the part POST /v1/charges and POST /v1/refunds share: read
// the key and the body, validate, take the fault set (from faults, read only
// now), fail or sleep as it says, then commit. commit returns what it made,
// or nil for a replay; announce sends the webhooks about what it made. what
// ("charge" or "refund") names the object in the logs.
func serveCreate[R interface{ validate() error }, M any](s *Server, w http.ResponseWriter, r *http.Request, what string,
	faults func() Faults, commit func(key string, req R) (storedAnswer, *M, error), announce func(*M)) {
	key, err := idempotencyKey(r)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	var req R
	if err := decodeBody(r, &req); err != nil {
		writeError(w, s.log, err)
		return
	}
	if err := req.validate(); err != nil {
		writeError(w, s.log, err)
		return
	}
	f := faults()
	if f.failNow() {
		s.log.Info(what+" call failed by fault", "idempotency_key", key, "status", f.errorStatus())
		writeError(w, s.log, &apiError{status: f.errorStatus(), code: codeSimulatedFault, message: "simulated provider failure (error_rate fault)"})
		return
	}
	// Deliberately not tied to r.Context(): a slow provider finishes its work
	// even when the caller has hung up, which is what causes double charges
	// (and, for refunds, a refund the caller never heard of).
	time.Sleep(f.latency())

	ans, made, err := commit(key, req)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	if made != nil {
		announce(made)
	}
	if f.DropAfterCommit {
		s.log.Info(what+" answer dropped by fault", "idempotency_key", key, what, ans.ID)
		dropConnection(w)
		return
	}
	if made == nil {
		w.Header().Set(headerReplayed, "true")
	}
	writeRaw(w, ans.Status, ans.Body)
}
