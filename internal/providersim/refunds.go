package providersim

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// refundRequest is the body of POST /v1/refunds; refunds are always of the whole amount.
type refundRequest struct {
	Charge string `json:"charge"`
}

// handleCreateRefund is POST /v1/refunds. Refunds are never faulted.
func (s *Server) handleCreateRefund(w http.ResponseWriter, r *http.Request) {
	key, err := idempotencyKey(r)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	var req refundRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, s.log, err)
		return
	}
	if req.Charge == "" {
		writeError(w, s.log, errorf(codeInvalidRequest, "charge is required"))
		return
	}
	ans, refunded, err := s.commitRefund(key, req)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	if refunded != nil {
		s.notify(EventChargeRefunded, *refunded)
	} else {
		w.Header().Set(headerReplayed, "true")
	}
	writeRaw(w, ans.Status, ans.Body)
}

// commitRefund refunds req.Charge under key, or returns the answer already
// stored under key. refunded is the charge after the refund, nil for a replay.
// Refusals (unknown charge, not refundable) are not stored: nothing happened,
// so the same key may be tried again.
func (s *Server) commitRefund(key string, req refundRequest) (ans storedAnswer, refunded *Charge, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.st.refundKeys[key]; ok {
		if s.st.refunds[prev.ID].Charge != req.Charge {
			return storedAnswer{}, nil, errorf(codeIdempotencyError, "Idempotency-Key was already used to refund another charge")
		}
		return *prev, nil, nil
	}
	ch, ok := s.st.charges[req.Charge]
	switch {
	case !ok:
		return storedAnswer{}, nil, errorf(codeResourceMissing, "no such charge: "+req.Charge)
	case ch.Status != StatusSucceeded:
		return storedAnswer{}, nil, errorf(codeChargeNotRefundable, "only a succeeded charge can be refunded")
	case ch.Refunded:
		return storedAnswer{}, nil, errorf(codeChargeAlreadyRefunded, "the charge has already been refunded")
	}
	re := &Refund{
		ID:             newID("re_"),
		Charge:         ch.ID,
		Amount:         ch.Amount,
		Status:         StatusSucceeded,
		IdempotencyKey: key,
		Created:        s.now().Unix(),
	}
	b, err := json.Marshal(re)
	if err != nil {
		return storedAnswer{}, nil, fmt.Errorf("encode refund: %w", err)
	}
	ans = storedAnswer{ID: re.ID, Status: http.StatusCreated, Body: b}
	s.st.refunds[re.ID] = re
	s.st.refundKeys[key] = &ans
	ch.Refunded = true
	if err := s.persistLocked(); err != nil {
		delete(s.st.refunds, re.ID)
		delete(s.st.refundKeys, key)
		ch.Refunded = false
		return storedAnswer{}, nil, fmt.Errorf("persist refund: %w", err)
	}
	s.log.Info("refund created", "refund", re.ID, "charge", ch.ID, "idempotency_key", key, "amount", re.Amount)
	c := *ch
	return ans, &c, nil
}
