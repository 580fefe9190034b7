package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/captures"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/reqlog"
)

// createCapture is POST /v1/payments/{id}/captures.
func (s *server) createCapture(w http.ResponseWriter, r *http.Request) {
	createOperation(s, w, r, decodeCapture, s.Payments.Capture)
}

// createVoid is POST /v1/payments/{id}/voids.
func (s *server) createVoid(w http.ResponseWriter, r *http.Request) {
	createOperation(s, w, r, decodeVoid, s.Payments.Void)
}

// createOperation runs a POST that creates an operation on payment {id}
// (a refund, a capture, a void): the key, the body (every field optional,
// so no body is the empty object), decode's validation, the fingerprint of
// the concrete path (so one key cannot act on two payments), then run.
func createOperation[T any, PT interface {
	*T
	Operation() *payments.OperationRequest
}](s *server, w http.ResponseWriter, r *http.Request, decode func([]byte) (T, error), run func(context.Context, T) (payments.Reply, error)) {
	key, body, ok := s.keyAndBody(w, r, readOptionalJSONBody)
	if !ok {
		return
	}
	req, err := decode(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	fp, err := fingerprint(r.URL.Path, body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	op := PT(&req).Operation()
	op.TenantID, op.PaymentID, op.IdempotencyKey, op.Fingerprint = tenantOf(r.Context()).ID, chi.URLParam(r, "id"), key, fp
	reqlog.From(r.Context()).PaymentID = op.PaymentID
	reply, err := run(r.Context(), req)
	s.writeReply(w, r, reply, err)
}

// getCapture is GET /v1/captures/{id}[?sync=true].
func (s *server) getCapture(w http.ResponseWriter, r *http.Request) {
	s.getHold(w, r, captures.KindCapture, apperr.CaptureNotFound)
}

// getVoid is GET /v1/voids/{id}[?sync=true].
func (s *server) getVoid(w http.ResponseWriter, r *http.Request) {
	s.getHold(w, r, captures.KindVoid, apperr.VoidNotFound)
}

// getHold answers capture or void (kind k) {id}, asking the provider first
// for ?sync=true when it is PENDING or UNKNOWN (as getRefund does).
func (s *server) getHold(w http.ResponseWriter, r *http.Request, k captures.Kind, missing apperr.Code) {
	t := tenantOf(r.Context())
	id := chi.URLParam(r, "id")
	sync, err := syncParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := captures.GetForTenant(r.Context(), s.Pool, t.ID, k, id)
	if errors.Is(err, captures.ErrNotFound) {
		s.writeError(w, r, apperr.New(missing, "no %s %q", k, id))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	reqlog.From(r.Context()).PaymentID = c.PaymentID
	if sync && (c.Status == lifecycle.Pending || c.Status == lifecycle.Unknown) {
		if c, _, err = s.Payments.SyncCapture(r.Context(), c.ID, payments.SyncOptions{Source: attempts.SourceAPI}); err != nil {
			// The provider could not be asked: answer what we know.
			s.log.WarnContext(r.Context(), string(k)+" sync failed", string(k)+"_id", id, "err", err)
			if c, err = captures.GetForTenant(r.Context(), s.Pool, t.ID, k, id); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
	}
	writeJSON(w, http.StatusOK, c.Public())
}
