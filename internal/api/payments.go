package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/reqlog"
)

// createRoute is the route the idempotency fingerprint names.
const createRoute = "/v1/payments"

func (s *server) createPayment(w http.ResponseWriter, r *http.Request) {
	key, body, ok := s.keyAndBody(w, r, readJSONBody)
	if !ok {
		return
	}
	t := tenantOf(r.Context())
	// A retry usually sends the very bytes it sent before: once this pod
	// has replayed them on this key, they are answered without decoding.
	reply, sum, ok := s.Payments.ReplayBody(t.ID, key, body)
	if ok {
		s.writeReply(w, r, reply, nil)
		return
	}
	req, err := decodeCreate(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	fp, err := fingerprint(createRoute, body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req.TenantID, req.IdempotencyKey, req.Fingerprint, req.BodySum = t.ID, key, fp, sum
	reply, err = s.Payments.Create(r.Context(), req)
	s.writeReply(w, r, reply, err)
}

// keyAndBody reads the Idempotency-Key and (with read) the JSON body of a
// create request, answering the problem itself when either is missing or bad.
func (s *server) keyAndBody(w http.ResponseWriter, r *http.Request, read func(*http.Request) ([]byte, error)) (string, []byte, bool) {
	key, err := idempotency.ParseKey(r.Header.Get("Idempotency-Key"))
	switch {
	case len(r.Header.Values("Idempotency-Key")) > 1:
		s.writeError(w, r, apperr.New(apperr.IdempotencyKeyInvalid, "exactly one Idempotency-Key header is allowed"))
		return "", nil, false
	case errors.Is(err, idempotency.ErrKeyMissing):
		s.writeError(w, r, apperr.New(apperr.IdempotencyKeyMissing, "Idempotency-Key header is required"))
		return "", nil, false
	case err != nil:
		s.writeError(w, r, apperr.New(apperr.IdempotencyKeyInvalid, "Idempotency-Key must be 1 to 255 visible ASCII characters"))
		return "", nil, false
	}
	body, err := read(r)
	if err != nil {
		s.writeError(w, r, err)
		return "", nil, false
	}
	return key, body, true
}

// fingerprint is the key's fingerprint of a POST of body to route; a body
// that names a member twice is invalid (400), whatever its decoded fields.
func fingerprint(route string, body []byte) ([]byte, error) {
	fp, err := idempotency.Fingerprint(http.MethodPost, route, body)
	var dup *idempotency.DuplicateNameError
	switch {
	case errors.As(err, &dup):
		return nil, invalid("%s appears more than once in the request body", dup.Name)
	case err != nil:
		return nil, invalid("request body is not valid JSON")
	}
	return fp, nil
}

// writeReply answers a create (or a refund) as the service decided.
func (s *server) writeReply(w http.ResponseWriter, r *http.Request, reply payments.Reply, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	reqlog.From(r.Context()).PaymentID = reply.PaymentID
	if reply.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(reply.Code)
	_, _ = w.Write(reply.Body)
}

func (s *server) getPayment(w http.ResponseWriter, r *http.Request) {
	t := tenantOf(r.Context())
	id := chi.URLParam(r, "id")
	reqlog.From(r.Context()).PaymentID = id
	sync, err := syncParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err := attempts.GetForTenant(r.Context(), s.Pool, t.ID, id)
	if errors.Is(err, attempts.ErrNotFound) {
		s.writeError(w, r, apperr.New(apperr.PaymentNotFound, "no payment %q", id))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if syncFn := s.syncOf(a.Status); syncFn != nil && sync {
		a, _, err = syncFn(r.Context(), a.ID, payments.SyncOptions{Source: attempts.SourceAPI})
		if err != nil {
			// The provider could not be asked: answer what we know.
			s.log.WarnContext(r.Context(), "sync failed", "payment_id", id, "err", err)
			if a, err = attempts.GetForTenant(r.Context(), s.Pool, t.ID, id); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
	}
	writeJSON(w, http.StatusOK, a.Public())
}

// syncOf is how ?sync=true asks the provider about a payment in status st:
// a PENDING or UNKNOWN one is resolved by its key (Sync), an AUTHORIZED one
// learns a capture, void or expiry made at the provider (CheckHeld); nil
// for the others, which the provider cannot change.
func (s *server) syncOf(st attempts.Status) func(context.Context, string, payments.SyncOptions) (attempts.Attempt, payments.SyncOutcome, error) {
	switch st {
	case attempts.Pending, attempts.Unknown:
		return s.Payments.Sync
	case attempts.Authorized:
		return s.Payments.CheckHeld
	}
	return nil
}

func (s *server) listPayments(w http.ResponseWriter, r *http.Request) {
	t := tenantOf(r.Context())
	page, err := pageOf(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	lq := attempts.ListQuery{TenantID: t.ID, OrderID: r.URL.Query().Get("order_id"), Limit: page.limit}
	if page.after != "" {
		after, err := attempts.GetForTenant(r.Context(), s.Pool, t.ID, page.after)
		if errors.Is(err, attempts.ErrNotFound) {
			s.writeError(w, r, invalid("starting_after names no payment of yours"))
			return
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		lq.After = &after
	}
	list, more, err := attempts.List(r.Context(), s.Pool, lq)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]attempts.Payment, len(list))
	for i, a := range list {
		out[i] = a.Public()
	}
	writeJSON(w, http.StatusOK, listBody[attempts.Payment]{Data: out, HasMore: more})
}
