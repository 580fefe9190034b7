package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/db"
)

// writeError answers err as problem+json. An application error answers its
// code; an error of the database being unreachable (db.ErrUnavailable, as
// db.Translate classifies it) 503 database_unavailable; anything else 500.
// The text of the last two is logged, never sent. Nothing here undoes or
// releases anything: a request whose COMMIT failed may have taken effect.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *apperr.Error
	switch {
	case errors.As(err, &e):
	case db.IsUnavailable(err):
		s.log.WarnContext(r.Context(), "request failed: database unavailable", "request_id", requestID(r.Context()), "err", err)
		e = apperr.NewDatabaseUnavailable()
	default:
		e = apperr.As(err)
		s.log.ErrorContext(r.Context(), "request failed", "request_id", requestID(r.Context()), "err", err)
	}
	apperr.Write(w, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
