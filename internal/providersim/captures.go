package providersim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Capture is one capture or void of an authorized charge, kept by the
// idempotency key that made it: what GET /v1/captures?idempotency_key=K and
// GET /v1/voids?idempotency_key=K answer. A void has no amount.
type Capture struct {
	Charge         string `json:"charge"`
	Amount         int64  `json:"amount,omitempty"`
	Reference      string `json:"reference"`
	IdempotencyKey string `json:"idempotency_key"`
	Created        int64  `json:"created"`
}

// captureRequest is POST /v1/charges/{id}/capture: {"amount":N,"reference":…},
// both optional (no amount: all that is held).
type captureRequest struct{ opRequest }

func (r captureRequest) validate() error { return r.validateAmount() }

// voidRequest is POST /v1/charges/{id}/void: {"reference":…}, optional.
type voidRequest struct{ opRequest }

func (r voidRequest) validate() error {
	if r.Amount != nil {
		return errorf(codeInvalidRequest, "a void takes no amount")
	}
	return nil
}

// handleCapture is POST /v1/charges/{id}/capture: count, fault (only when
// the faults say "captures":true), sleep, then capture or replay.
func (s *Server) handleCapture(w http.ResponseWriter, r *http.Request) {
	s.captureCalls.Add(1)
	serveCreate(s, w, r, "capture", s.captureFaults, func(key string, req captureRequest) (storedAnswer, *Charge, error) {
		req.Charge = r.PathValue("id")
		return s.commitHold(key, req.opRequest, captureOp)
	}, func(ch *Charge) { s.notifyCharge(EventChargeCaptured, *ch) })
}

// handleVoid is POST /v1/charges/{id}/void, like handleCapture.
func (s *Server) handleVoid(w http.ResponseWriter, r *http.Request) {
	s.voidCalls.Add(1)
	serveCreate(s, w, r, "void", s.captureFaults, func(key string, req voidRequest) (storedAnswer, *Charge, error) {
		req.Charge = r.PathValue("id")
		return s.commitHold(key, req.opRequest, voidOp)
	}, func(ch *Charge) { s.notifyCharge(EventChargeVoided, *ch) })
}

// holdOp is what a capture or a void does to an authorized charge.
type holdOp struct {
	name    string
	records func(*state) (map[string]*Capture, map[string]*storedAnswer)
	// apply changes the authorized charge ch (amount: what a capture
	// takes) under key, and returns the record's amount.
	apply func(ch *Charge, key string, amount int64) int64
}

var (
	captureOp = holdOp{
		name:    "capture",
		records: func(st *state) (map[string]*Capture, map[string]*storedAnswer) { return st.captures, st.captureKeys },
		apply: func(ch *Charge, key string, amount int64) int64 {
			ch.Status, ch.Captured, ch.AmountCaptured, ch.AmountCapturable, ch.CaptureKey = StatusSucceeded, true, amount, 0, &key
			return amount
		},
	}
	voidOp = holdOp{
		name:    "void",
		records: func(st *state) (map[string]*Capture, map[string]*storedAnswer) { return st.voids, st.voidKeys },
		apply: func(ch *Charge, key string, _ int64) int64 {
			ch.Status, ch.AmountCapturable, ch.VoidKey = StatusVoided, 0, &key
			return 0
		},
	}
)

// commitHold captures or voids req.Charge under key, or returns the answer
// already stored under key (made is then nil). Refusals are not stored:
// nothing happened, so the same key may be sent again.
func (s *Server) commitHold(key string, req opRequest, op holdOp) (ans storedAnswer, made *Charge, err error) {
	defer s.lock()()
	records, answers := op.records(s.st)
	if prev, ok := answers[key]; ok {
		if !prev.Request.same(req) {
			return storedAnswer{}, nil, errorf(codeIdempotencyError, "Idempotency-Key was already used with different parameters")
		}
		return *prev, nil, nil
	}
	ch, ok := s.st.charges[req.Charge]
	if !ok {
		return storedAnswer{}, nil, errorf(codeResourceMissing, "no such charge: "+req.Charge)
	}
	if err := holdRefusal(ch); err != nil {
		return storedAnswer{}, nil, err
	}
	amount := ch.AmountCapturable
	if req.Amount != nil {
		amount = *req.Amount
	}
	if amount > ch.AmountCapturable {
		return storedAnswer{}, nil, errorf(codeAmountTooLarge, fmt.Sprintf(
			"capture amount %d is more than charge %s holds, which is %d", amount, ch.ID, ch.AmountCapturable))
	}
	before := *ch
	rec := &Capture{Charge: ch.ID, Reference: req.Reference, IdempotencyKey: key, Created: s.now().Unix()}
	rec.Amount = op.apply(ch, key, amount)
	if req.cancelReason != "" {
		ch.CancellationReason = req.cancelReason
	}
	body, err := json.Marshal(ch)
	if err != nil {
		*ch = before
		return storedAnswer{}, nil, fmt.Errorf("encode charge: %w", err)
	}
	stored := req
	ans = storedAnswer{ID: ch.ID, Status: http.StatusOK, Body: body, Request: &stored}
	delete(s.st.held, ch.ID)
	records[key], answers[key] = rec, &ans
	if err := s.persistLocked(); err != nil {
		// Undo: the caller is told it failed, so it must not have happened.
		*ch = before
		s.st.held[ch.ID] = ch
		delete(records, key)
		delete(answers, key)
		return storedAnswer{}, nil, fmt.Errorf("persist %s: %w", op.name, err)
	}
	s.log.Info("charge "+ch.Status, "charge", ch.ID, "idempotency_key", key, "amount_captured", ch.AmountCaptured)
	c := *ch
	return ans, &c, nil
}

// holdRefusal is why charge ch cannot be captured or voided now, or nil
// when it is authorized.
func holdRefusal(ch *Charge) error {
	switch {
	case ch.Status == StatusAuthorized:
		return nil
	case ch.Status == StatusSucceeded && ch.manual():
		return errorf(codeChargeAlreadyCaptured, "charge "+ch.ID+" is already captured")
	case ch.Status == StatusExpired:
		return errorf(codeAuthorizationExpired, "the authorization of charge "+ch.ID+" expired")
	}
	return errorf(codeChargeNotCapturable, "charge "+ch.ID+" is "+ch.Status+" and holds nothing to capture or void")
}

// handleListCaptures is GET /v1/captures?idempotency_key=K: the capture
// made under K, or 404 resource_missing.
func (s *Server) handleListCaptures(w http.ResponseWriter, r *http.Request) {
	s.serveHoldByKey(w, r, captureOp)
}

// handleListVoids is GET /v1/voids?idempotency_key=K, like captures.
func (s *Server) handleListVoids(w http.ResponseWriter, r *http.Request) {
	s.serveHoldByKey(w, r, voidOp)
}

func (s *Server) serveHoldByKey(w http.ResponseWriter, r *http.Request, op holdOp) {
	q := r.URL.Query()
	if !q.Has("idempotency_key") {
		writeError(w, s.log, errorf(codeInvalidRequest, "idempotency_key is required"))
		return
	}
	serveFound(s, w, func() (*Capture, bool) {
		records, _ := op.records(s.st)
		rec, ok := records[q.Get("idempotency_key")]
		return rec, ok
	}, "no "+op.name+" was made with that idempotency key")
}

// captureFaults is the fault set a capture or void call starts with: the
// one in force when it says "captures":true, else none.
func (s *Server) captureFaults() Faults {
	f := s.currentFaults()
	if !f.Captures {
		return Faults{}
	}
	return f
}

// lock takes the state's lock, first expiring every authorization whose
// capture_before has passed; the function it returns unlocks and then
// sends charge.expired for each. Every use of the state that reads or
// changes charges takes it, so an authorization is expired at the latest
// when it is next read.
func (s *Server) lock() (unlock func()) {
	s.mu.Lock()
	expired := s.expireLocked(func(ch *Charge) bool { return !s.now().Before(time.Unix(ch.CaptureBefore, 0)) })
	return func() {
		s.mu.Unlock()
		for _, ch := range expired {
			s.notifyCharge(EventChargeExpired, ch)
		}
	}
}

// expireLocked expires the held charges due says are due, persists the
// state if any was, and returns them as they are now.
func (s *Server) expireLocked(due func(*Charge) bool) []Charge {
	var out []Charge
	for id, ch := range s.st.held {
		if !due(ch) {
			continue
		}
		ch.Status, ch.AmountCapturable = StatusExpired, 0
		delete(s.st.held, id)
		out = append(out, *ch)
		s.log.Info("authorization expired", "charge", ch.ID, "capture_before", ch.CaptureBefore)
	}
	if len(out) > 0 {
		if err := s.persistLocked(); err != nil {
			// Kept in memory: the next write persists it.
			s.log.Error("persist expired authorizations", "err", err)
		}
	}
	return out
}

// handleSimExpire is POST /_sim/charges/{id}/expire: the authorization of
// the charge expires now (charge.expired is sent). 200 with the charge (an
// expired one is answered as it is), 404 for an unknown charge, 400
// charge_not_capturable for a charge that is not authorized.
func (s *Server) handleSimExpire(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	unlock := s.lock()
	ch, ok := s.st.charges[id]
	var (
		refusal error
		expired bool // by this call
	)
	switch {
	case !ok:
		refusal = errorf(codeResourceMissing, "no such charge: "+id)
	case ch.Status == StatusAuthorized:
		expired = len(s.expireLocked(func(held *Charge) bool { return held.ID == id })) == 1
	case ch.Status != StatusExpired:
		refusal = errorf(codeChargeNotCapturable, "charge "+id+" is "+ch.Status+", not authorized")
	}
	var out Charge
	if refusal == nil {
		out = *ch
	}
	unlock()
	if refusal != nil {
		writeError(w, s.log, refusal)
		return
	}
	if expired {
		s.notifyCharge(EventChargeExpired, out)
	}
	writeJSON(w, http.StatusOK, out)
}
