package providersim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
