package api

import (
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/refunds"
	"github.com/acme/paymentsvc/internal/reqlog"
)

// createRefund is POST /v1/payments/{id}/refunds (see createOperation).
func (s *server) createRefund(w http.ResponseWriter, r *http.Request) {
	createOperation(s, w, r, decodeRefund, s.Payments.Refund)
}

// getRefund is GET /v1/refunds/{id}[?sync=true].
func (s *server) getRefund(w http.ResponseWriter, r *http.Request) {
	t := tenantOf(r.Context())
	id := chi.URLParam(r, "id")
	sync, err := syncParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rf, err := refunds.GetForTenant(r.Context(), s.Pool, t.ID, id)
	if errors.Is(err, refunds.ErrNotFound) {
		s.writeError(w, r, apperr.New(apperr.RefundNotFound, "no refund %q", id))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	reqlog.From(r.Context()).PaymentID = rf.PaymentID
	if sync && !rf.Status.Final() && rf.Status != attempts.Created {
		if rf, _, err = s.Payments.SyncRefund(r.Context(), rf.ID, payments.SyncOptions{Source: attempts.SourceAPI}); err != nil {
			// The provider could not be asked: answer what we know.
			s.log.WarnContext(r.Context(), "refund sync failed", "refund_id", id, "err", err)
			if rf, err = refunds.GetForTenant(r.Context(), s.Pool, t.ID, id); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
	}
	writeJSON(w, http.StatusOK, rf.Public())
}

// listRefunds is GET /v1/payments/{id}/refunds.
func (s *server) listRefunds(w http.ResponseWriter, r *http.Request) {
	t := tenantOf(r.Context())
	paymentID := chi.URLParam(r, "id")
	reqlog.From(r.Context()).PaymentID = paymentID
	pg, err := pageOf(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, err := attempts.GetForTenant(r.Context(), s.Pool, t.ID, paymentID); errors.Is(err, attempts.ErrNotFound) {
		s.writeError(w, r, apperr.New(apperr.PaymentNotFound, "no payment %q", paymentID))
		return
	} else if err != nil {
		s.writeError(w, r, err)
		return
	}
	var after *refunds.Refund
	if pg.after != "" {
		rf, err := refunds.GetForTenant(r.Context(), s.Pool, t.ID, pg.after)
		if errors.Is(err, refunds.ErrNotFound) || (err == nil && rf.PaymentID != paymentID) {
			s.writeError(w, r, invalid("starting_after names no refund of this payment"))
			return
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		after = &rf
	}
	list, more, err := refunds.List(r.Context(), s.Pool, paymentID, after, pg.limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]refunds.View, len(list))
	for i, rf := range list {
		out[i] = rf.Public()
	}
	writeJSON(w, http.StatusOK, listBody[refunds.View]{Data: out, HasMore: more})
}
