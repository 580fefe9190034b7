package providersim

import (
	"encoding/json"
	"net/http"
)

// handleSimCharges is GET /_sim/charges: every charge, ordered by created then id.
func (s *Server) handleSimCharges(w http.ResponseWriter, r *http.Request) {
	unlock := s.lock()
	data := s.st.sortedCharges(nil, 0)
	unlock()
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
}

// handleSimRefunds is GET /_sim/refunds: every refund, ordered by created then id.
func (s *Server) handleSimRefunds(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	data := s.st.sortedRefunds(nil)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
}

// maxImportBytes bounds a POST /_sim/charges body (about 100,000 charges).
const maxImportBytes = 32 << 20

// handleSimImport is POST /_sim/charges with {"data":[charges]}: it records
// the charges as given, without webhooks, for tests and benchmarks that need
// a provider holding many charges (settling a busy day, say). An empty id is
// assigned; idempotency_key, if any, must be new; amount_refunded is taken as
// given, "refunded":true alone means the whole amount, and no refund records
// are made for either. It answers {"imported":N}.
func (s *Server) handleSimImport(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Data []Charge `json:"data"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxImportBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeError(w, s.log, errorf(codeInvalidRequest, "import body: "+err.Error()))
		return
	}
	defer s.lock()()
	for i := range body.Data {
		c := &body.Data[i]
		if c.IdempotencyKey != "" {
			if _, _, ok := s.st.chargeByKey(c.IdempotencyKey); ok {
				writeError(w, s.log, errorf(codeInvalidRequest, "idempotency_key "+c.IdempotencyKey+" is taken"))
				return
			}
		}
		switch {
		case c.Status == StatusAuthorized && c.CaptureBefore == 0:
			writeError(w, s.log, errorf(codeInvalidRequest, "an authorized charge needs its capture_before"))
			return
		case c.Status == StatusAuthorized:
			c.AmountCapturable = c.Amount
		case c.Status != StatusSucceeded && c.Status != StatusFailed && c.Status != StatusVoided && c.Status != StatusExpired:
			writeError(w, s.log, errorf(codeInvalidRequest, "status must be succeeded, failed, authorized, voided or expired"))
			return
		}
		if err := c.normalizeRefunds(); err != nil {
			writeError(w, s.log, errorf(codeInvalidRequest, err.Error()))
			return
		}
	}
	for _, c := range body.Data {
		ch := c
		if ch.ID == "" {
			ch.ID = newID("ch_")
		}
		s.st.addCharge(&ch)
		if ch.IdempotencyKey != "" {
			ans, err := chargeAnswer(&ch)
			if err != nil {
				writeError(w, s.log, err)
				return
			}
			s.st.chargeKeys[ch.IdempotencyKey] = &ans
		}
	}
	if err := s.persistLocked(); err != nil {
		writeError(w, s.log, err)
		return
	}
	s.log.Info("charges imported", "count", len(body.Data))
	writeJSON(w, http.StatusOK, map[string]int{"imported": len(body.Data)})
}

// handleSimStats is GET /_sim/stats.
func (s *Server) handleSimStats(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	st := s.statsLocked()
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, st)
}

// statsLocked reads the counters; callers hold s.mu.
func (s *Server) statsLocked() Stats {
	return Stats{
		ChargeCalls:  s.chargeCalls.Load(),
		Charges:      int64(len(s.st.charges)),
		RefundCalls:  s.refundCalls.Load(),
		Refunds:      int64(len(s.st.refunds)),
		CaptureCalls: s.captureCalls.Load(),
		VoidCalls:    s.voidCalls.Load(),
		WebhooksSent: s.webhooksSent.Load(),
	}
}

// handleGetFaults is GET /_sim/faults, to see what is in force.
func (s *Server) handleGetFaults(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.currentFaults())
}

// handlePutFaults is PUT /_sim/faults: the body replaces the whole fault set
// (an omitted field is zero), for charge calls, and for refund calls too when
// it says "refunds":true. Unknown fields are refused so that a typo does
// not silently leave a test running without its fault.
func (s *Server) handlePutFaults(w http.ResponseWriter, r *http.Request) {
	var f Faults
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		writeError(w, s.log, errorf(codeInvalidRequest, "faults body: "+err.Error()))
		return
	}
	if err := f.validate(); err != nil {
		writeError(w, s.log, err)
		return
	}
	s.setFaults(f)
	s.log.Info("faults set", "latency_ms", f.LatencyMS, "error_rate", f.ErrorRate, "error_status", f.ErrorStatus, "drop_after_commit", f.DropAfterCommit, "refunds", f.Refunds)
	writeJSON(w, http.StatusOK, f)
}

// handleDeleteFaults is DELETE /_sim/faults: back to the startup latency and nothing else.
func (s *Server) handleDeleteFaults(w http.ResponseWriter, r *http.Request) {
	s.setFaults(s.defaultFaults)
	s.log.Info("faults cleared")
	writeJSON(w, http.StatusOK, s.defaultFaults)
}
