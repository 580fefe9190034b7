package providersim

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// opRequest is a call that acts on a charge: the body of POST /v1/refunds,
// and of POST /v1/charges/{id}/capture and /void with the charge of the
// path. Amount nil means the whole unrefunded rest (a refund) or the whole
// held amount (a capture). A replay must repeat it field for field, an
// omitted amount included: {"charge":C} and {"charge":C,"amount":500} are
// different requests even when the rest was 500.
type opRequest struct {
	Charge    string `json:"charge"`
	Amount    *int64 `json:"amount,omitempty"`
	Reference string `json:"reference,omitempty"`
	// cancelReason is the Stripe face's cancellation_reason of a void,
	// recorded on the charge.
	cancelReason string
}

// refundRequest is the body of POST /v1/refunds.
type refundRequest struct {
	opRequest
	// meta and reason are the Stripe face's metadata[…] and reason,
	// recorded on the refund.
	meta   map[string]string
	reason string
}

func (r refundRequest) validate() error {
	if r.Charge == "" {
		return errorf(codeInvalidRequest, "charge is required")
	}
	return r.validateAmount()
}

func (r opRequest) validateAmount() error {
	if r.Amount != nil && *r.Amount <= 0 {
		return errorf(codeInvalidRequest, "amount must be a positive integer")
	}
	return nil
}

// same tells whether o repeats r.
func (r opRequest) same(o opRequest) bool {
	if r.Charge != o.Charge || r.Reference != o.Reference || (r.Amount == nil) != (o.Amount == nil) {
		return false
	}
	return r.Amount == nil || *r.Amount == *o.Amount
}

// handleCreateRefund is POST /v1/refunds: count, fault (only when the faults
// say "refunds":true), sleep, then refund or replay.
func (s *Server) handleCreateRefund(w http.ResponseWriter, r *http.Request) {
	s.refundCalls.Add(1)
	serveCreate(s, w, r, "refund", s.refundFaults, s.commitRefund, func(made *madeRefund) {
		s.notifyRefund(made.refund)
		s.notifyCharge(EventChargeRefunded, made.charge)
	})
}

// madeRefund is a new refund and its charge after it, for the webhooks.
type madeRefund struct {
	refund Refund
	charge Charge
}

// commitRefund refunds req under key, or returns the answer already stored
// under key (made is then nil). Refusals (unknown charge, not refundable,
// too large) are not stored: nothing happened, so the same key may be tried
// again, and succeeds once the cause is gone.
func (s *Server) commitRefund(key string, req refundRequest) (ans storedAnswer, made *madeRefund, err error) {
	defer s.lock()()
	if _, prev, ok := s.st.refundByKey(key); ok {
		if !prev.Request.same(req.opRequest) {
			return storedAnswer{}, nil, errorf(codeIdempotencyError, "Idempotency-Key was already used with different parameters")
		}
		return *prev, nil, nil
	}
	ch, ok := s.st.charges[req.Charge]
	switch {
	case !ok:
		return storedAnswer{}, nil, errorf(codeResourceMissing, "no such charge: "+req.Charge)
	case ch.Status != StatusSucceeded:
		return storedAnswer{}, nil, errorf(codeChargeNotRefundable, "only a succeeded charge can be refunded; "+ch.ID+" is "+ch.Status)
	}
	rest := ch.refundable()
	amount := rest
	if req.Amount != nil {
		amount = *req.Amount
	}
	if rest == 0 {
		return storedAnswer{}, nil, errorf(codeAmountTooLarge, "charge "+ch.ID+" is already fully refunded: nothing is left to refund")
	}
	if amount > rest || amount <= 0 {
		return storedAnswer{}, nil, errorf(codeAmountTooLarge, fmt.Sprintf(
			"refund amount %d is more than the unrefunded rest of charge %s, which is %d", amount, ch.ID, rest))
	}
	re := &Refund{
		ID:             newID("re_"),
		Charge:         ch.ID,
		Amount:         amount,
		Currency:       ch.Currency,
		Status:         StatusSucceeded,
		Reference:      req.Reference,
		IdempotencyKey: key,
		Created:        s.now().Unix(),
		Metadata:       NewMetadata(req.meta),
		Reason:         req.reason,
	}
	b, err := json.Marshal(re)
	if err != nil {
		return storedAnswer{}, nil, fmt.Errorf("encode refund: %w", err)
	}
	stored := req.opRequest
	ans = storedAnswer{ID: re.ID, Status: http.StatusCreated, Body: b, Request: &stored}
	before := *ch
	s.st.refunds[re.ID] = re
	s.st.refundKeys[key] = &ans
	ch.AmountRefunded += amount
	ch.Refunded = ch.AmountRefunded == ch.AmountCaptured
	if err := s.persistLocked(); err != nil {
		// Forget the refund: the caller is told it failed, so it must not exist.
		delete(s.st.refunds, re.ID)
		delete(s.st.refundKeys, key)
		*ch = before
		return storedAnswer{}, nil, fmt.Errorf("persist refund: %w", err)
	}
	s.log.Info("refund created", "refund", re.ID, "charge", ch.ID, "idempotency_key", key,
		"amount", re.Amount, "amount_refunded", ch.AmountRefunded, "refunded", ch.Refunded)
	return ans, &madeRefund{refund: *re, charge: *ch}, nil
}

// handleListRefunds is GET /v1/refunds: one refund by ?idempotency_key=K
// (200, or 404 resource_missing), or else {"data":[…],"has_more":false} with
// every refund matching the optional ?charge and ?reference, ordered by
// created then id.
func (s *Server) handleListRefunds(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Has("idempotency_key") {
		serveFound(s, w, func() (*Refund, bool) {
			re, _, ok := s.st.refundByKey(q.Get("idempotency_key"))
			return re, ok
		}, "no refund was created with that idempotency key")
		return
	}
	charge, byCharge := q.Get("charge"), q.Has("charge")
	ref, byRef := q.Get("reference"), q.Has("reference")
	s.mu.Lock()
	data := s.st.sortedRefunds(func(re *Refund) bool {
		return (!byCharge || re.Charge == charge) && (!byRef || re.Reference == ref)
	})
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"data": data, "has_more": false})
}

// handleGetRefund is GET /v1/refunds/{id}.
func (s *Server) handleGetRefund(w http.ResponseWriter, r *http.Request) {
	serveByID(s, w, r, s.st.refunds, "refund")
}
