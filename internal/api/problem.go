package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/db"
)

// StatusClientClosedRequest is the status logged and counted for a request
// whose client hung up before it was answered (nginx's 499): nobody reads
// an answer any more, and it is not the service's failure, so it is not
// counted among the 5xx.
const StatusClientClosedRequest = 499

// writeError answers err as problem+json. An application error answers its
// code; an error of the database being unreachable (db.ErrUnavailable, as
// db.Translate classifies it) 503 database_unavailable; a request that
// failed because its client hung up 499 client_closed_request (logged and
// counted, with no body); anything else 500. The text of the last three is
// logged, never sent. Nothing here undoes or releases anything: a request
// whose COMMIT failed may have taken effect.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *apperr.Error
	switch {
	case errors.As(err, &e):
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		s.log.InfoContext(r.Context(), "request ended: client closed request", "request_id", requestID(r.Context()),
			"code", "client_closed_request", "err", err)
		w.WriteHeader(StatusClientClosedRequest)
		return
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
