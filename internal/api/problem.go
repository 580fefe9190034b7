package api

import (
	"encoding/json"
	"net/http"

	"github.com/acme/paymentsvc/internal/apperr"
)

// writeError answers err as problem+json. Internal errors are logged with
// their text and answered with a generic detail.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := apperr.As(err)
	if e.Code == apperr.Internal {
		s.log.ErrorContext(r.Context(), "request failed", "request_id", requestID(r.Context()), "err", err)
	}
	apperr.Write(w, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
