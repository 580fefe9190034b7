package providersim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// declinedPaymentMethod is the test card that is always declined.
const declinedPaymentMethod = "pm_card_declined"

// chargeRequest is the body of POST /v1/charges. A replay must match it
// field for field (compared as parsed values, so key order and spacing do not matter).
type chargeRequest struct {
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	PaymentMethod string `json:"payment_method"`
	Reference     string `json:"reference"`
	// Capture false only authorizes the amount; omitted or true charges
	// it at once (the same request either way).
	Capture *bool `json:"capture,omitempty"`
}

// manual reports whether the request only authorizes.
func (c chargeRequest) manual() bool { return c.Capture != nil && !*c.Capture }

// same tells whether o repeats c.
func (c chargeRequest) same(o chargeRequest) bool {
	return c.Amount == o.Amount && c.Currency == o.Currency && c.PaymentMethod == o.PaymentMethod &&
		c.Reference == o.Reference && c.manual() == o.manual()
}

func (c chargeRequest) validate() error {
	if c.Amount <= 0 {
		return errorf(codeInvalidRequest, "amount must be a positive integer")
	}
	if c.Currency == "" {
		return errorf(codeInvalidRequest, "currency is required")
	}
	return nil
}

func requestOf(ch *Charge) chargeRequest {
	req := chargeRequest{Amount: ch.Amount, Currency: ch.Currency, PaymentMethod: ch.PaymentMethod, Reference: ch.Reference}
	if ch.manual() {
		capture := false
		req.Capture = &capture
	}
	return req
}

// handleCreateCharge is POST /v1/charges: count, fault, sleep, then create or replay.
func (s *Server) handleCreateCharge(w http.ResponseWriter, r *http.Request) {
	s.chargeCalls.Add(1)
	serveCreate(s, w, r, "charge", s.currentFaults, s.commitCharge, func(created *Charge) {
		s.notifyCharge(chargeEventType(created), *created)
	})
}

// commitCharge creates the charge for key, or returns the answer already
// stored under it. created is nil for a replay.
func (s *Server) commitCharge(key string, req chargeRequest) (ans storedAnswer, created *Charge, err error) {
	defer s.lock()()
	if ch, prev, ok := s.st.chargeByKey(key); ok {
		if !requestOf(ch).same(req) {
			return storedAnswer{}, nil, errorf(codeIdempotencyError, "Idempotency-Key was already used with different parameters")
		}
		return *prev, nil, nil
	}
	ch := s.newCharge(key, req)
	ans, err = chargeAnswer(ch)
	if err != nil {
		return storedAnswer{}, nil, err
	}
	s.st.addCharge(ch)
	s.st.chargeKeys[key] = &ans
	if err := s.persistLocked(); err != nil {
		// Forget the charge: the caller is told it failed, so it must not exist.
		s.st.removeCharge(ch.ID)
		delete(s.st.chargeKeys, key)
		return storedAnswer{}, nil, fmt.Errorf("persist charge: %w", err)
	}
	s.log.Info("charge created", "charge", ch.ID, "idempotency_key", key, "status", ch.Status, "amount", ch.Amount, "currency", ch.Currency)
	c := *ch
	return ans, &c, nil
}

func (s *Server) newCharge(key string, req chargeRequest) *Charge {
	ch := &Charge{
		ID:             newID("ch_"),
		Amount:         req.Amount,
		Currency:       req.Currency,
		Status:         StatusSucceeded,
		Reference:      req.Reference,
		IdempotencyKey: key,
		PaymentMethod:  req.PaymentMethod,
		Created:        s.now().Unix(),
	}
	if req.manual() {
		ch.CaptureBefore = ch.Created + int64(s.cfg.AuthTTL/time.Second)
	}
	switch {
	case req.PaymentMethod == declinedPaymentMethod:
		ch.Status = StatusFailed
		ch.FailureCode = codeCardDeclined
	case req.manual():
		ch.Status, ch.AmountCapturable = StatusAuthorized, ch.Amount
	default:
		ch.Captured, ch.AmountCaptured = true, ch.Amount
	}
	return ch
}

// declinedAnswer is the 402 body: the error first, then the failed charge.
type declinedAnswer struct {
	Error  errorBody `json:"error"`
	Charge *Charge   `json:"charge"`
}

// chargeAnswer is the answer to the call that created ch: 201 with the charge,
// or 402 with the error and the failed charge.
func chargeAnswer(ch *Charge) (storedAnswer, error) {
	status, v := http.StatusCreated, any(ch)
	if ch.Status == StatusFailed {
		e := errorf(codeCardDeclined, "the card was declined")
		status = e.status
		v = declinedAnswer{Error: errorBody{Code: e.code, Message: e.message}, Charge: ch}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return storedAnswer{}, fmt.Errorf("encode charge: %w", err)
	}
	return storedAnswer{ID: ch.ID, Status: status, Body: b}, nil
}
