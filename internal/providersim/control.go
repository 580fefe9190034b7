package providersim

import (
	"encoding/json"
	"net/http"
)

// handleSimCharges is GET /_sim/charges: every charge, ordered by created then id.
func (s *Server) handleSimCharges(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	data := s.st.sortedCharges(nil)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
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
		Refunds:      int64(len(s.st.refunds)),
		WebhooksSent: s.webhooksSent.Load(),
	}
}

// handleGetFaults is GET /_sim/faults, to see what is in force.
func (s *Server) handleGetFaults(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.currentFaults())
}

// handlePutFaults is PUT /_sim/faults: the body replaces the whole fault set
// (an omitted field is zero). Unknown fields are refused so that a typo does
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
	s.log.Info("faults set", "latency_ms", f.LatencyMS, "error_rate", f.ErrorRate, "error_status", f.ErrorStatus, "drop_after_commit", f.DropAfterCommit)
	writeJSON(w, http.StatusOK, f)
}

// handleDeleteFaults is DELETE /_sim/faults: back to the startup latency and nothing else.
func (s *Server) handleDeleteFaults(w http.ResponseWriter, r *http.Request) {
	s.setFaults(s.defaultFaults)
	s.log.Info("faults cleared")
	writeJSON(w, http.StatusOK, s.defaultFaults)
}
