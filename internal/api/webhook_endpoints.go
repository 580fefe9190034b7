package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/delivery"
	"github.com/acme/paymentsvc/internal/idempotency"
)

// endpointsRoute is the route the idempotency fingerprint of a create names.
const endpointsRoute = "/v1/webhook_endpoints"

// endpointRequest is the body of POST /v1/webhook_endpoints.
type endpointRequest struct {
	URL         *string   `json:"url"`
	EventTypes  *[]string `json:"event_types"` // absent or null: every type
	Description *string   `json:"description"`
}

// createEndpoint is POST /v1/webhook_endpoints. Its Idempotency-Key is
// optional: with one, a repeat replays the stored answer (the same secret).
func (s *server) createEndpoint(w http.ResponseWriter, r *http.Request) {
	key, ok := s.optionalKey(w, r)
	if !ok {
		return
	}
	raw, err := readJSONBody(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var body endpointRequest
	if err := decodeStrict(raw, &body); err != nil {
		s.writeError(w, r, err)
		return
	}
	if body.URL == nil {
		s.writeError(w, r, invalid("url is required"))
		return
	}
	req := delivery.CreateRequest{
		New:            delivery.New{TenantID: tenantOf(r.Context()).ID, URL: *body.URL, Description: body.Description},
		IdempotencyKey: key,
	}
	if body.EventTypes != nil {
		req.EventTypes = append([]string{}, *body.EventTypes...)
	}
	// Also without a key: it refuses a body that names a member twice.
	if req.Fingerprint, err = fingerprint(endpointsRoute, raw); err != nil {
		s.writeError(w, r, err)
		return
	}
	reply, err := s.Endpoints.Create(r.Context(), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if reply.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(reply.Code)
	_, _ = w.Write(reply.Body)
}

// optionalKey reads an Idempotency-Key that may be left out ("" then),
// answering the problem itself when one is sent malformed.
func (s *server) optionalKey(w http.ResponseWriter, r *http.Request) (string, bool) {
	if len(r.Header.Values("Idempotency-Key")) == 0 {
		return "", true
	}
	key, err := idempotency.ParseKey(r.Header.Get("Idempotency-Key"))
	switch {
	case len(r.Header.Values("Idempotency-Key")) > 1:
		s.writeError(w, r, apperr.New(apperr.IdempotencyKeyInvalid, "exactly one Idempotency-Key header is allowed"))
		return "", false
	case err != nil: // an empty one included
		s.writeError(w, r, apperr.New(apperr.IdempotencyKeyInvalid, "Idempotency-Key must be 1 to 255 visible ASCII characters"))
		return "", false
	}
	return key, true
}

// listEndpoints is GET /v1/webhook_endpoints.
func (s *server) listEndpoints(w http.ResponseWriter, r *http.Request) {
	pg, err := pageOf(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list, more, err := s.Endpoints.List(r.Context(), tenantOf(r.Context()).ID, pg.after, pg.limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, listBody[delivery.Endpoint]{Data: list, HasMore: more})
}

// getEndpoint is GET /v1/webhook_endpoints/{id}: never the secret.
func (s *server) getEndpoint(w http.ResponseWriter, r *http.Request) {
	e, err := s.Endpoints.Get(r.Context(), tenantOf(r.Context()).ID, chi.URLParam(r, "id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

// deleteEndpoint is DELETE /v1/webhook_endpoints/{id}: 204, and no
// delivery to it starts afterwards.
func (s *server) deleteEndpoint(w http.ResponseWriter, r *http.Request) {
	if err := s.Endpoints.Delete(r.Context(), tenantOf(r.Context()).ID, chi.URLParam(r, "id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// rotateSecret is POST /v1/webhook_endpoints/{id}/rotate_secret: the new
// secret, once; the old one signs beside it for 24 hours. It takes no body
// (one sent is not read) and no Idempotency-Key: every call rotates.
func (s *server) rotateSecret(w http.ResponseWriter, r *http.Request) {
	rotated, err := s.Endpoints.RotateSecret(r.Context(), tenantOf(r.Context()).ID, chi.URLParam(r, "id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rotated)
}

// listDeliveries is GET /v1/webhook_endpoints/{id}/deliveries.
func (s *server) listDeliveries(w http.ResponseWriter, r *http.Request) {
	pg, err := pageOf(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list, more, err := s.Endpoints.Deliveries(r.Context(), tenantOf(r.Context()).ID, chi.URLParam(r, "id"), pg.after, pg.limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, listBody[delivery.Delivery]{Data: list, HasMore: more})
}

// retryDelivery is POST /v1/webhook_deliveries/{id}/retry: 202, the
// delivery due now with a fresh schedule. No body (one sent is not read),
// no Idempotency-Key.
func (s *server) retryDelivery(w http.ResponseWriter, r *http.Request) {
	d, err := s.Endpoints.Retry(r.Context(), tenantOf(r.Context()).ID, chi.URLParam(r, "id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, d)
}
