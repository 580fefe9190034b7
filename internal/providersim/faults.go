package providersim

import (
	"math/rand/v2"
	"net/http"
	"time"
)

// currentFaults is the fault set a charge call starts with; a PUT during the
// call does not change it halfway.
func (s *Server) currentFaults() Faults {
	s.faultsMu.RLock()
	defer s.faultsMu.RUnlock()
	return s.faults
}

// refundFaults is the fault set a refund call starts with: the one in force
// when it says "refunds":true, else none (not even the startup latency,
// which SIM_LATENCY documents as a charge delay).
func (s *Server) refundFaults() Faults {
	f := s.currentFaults()
	if !f.Refunds {
		return Faults{}
	}
	return f
}

func (s *Server) setFaults(f Faults) {
	s.faultsMu.Lock()
	defer s.faultsMu.Unlock()
	s.faults = f
}

// validate rejects a fault set that cannot be applied.
func (f Faults) validate() error {
	switch {
	case f.LatencyMS < 0:
		return errorf(codeInvalidRequest, "latency_ms must not be negative")
	case f.ErrorRate < 0 || f.ErrorRate > 1:
		return errorf(codeInvalidRequest, "error_rate must be between 0 and 1")
	case f.ErrorStatus != 0 && (f.ErrorStatus < 400 || f.ErrorStatus > 599):
		return errorf(codeInvalidRequest, "error_status must be 0 (meaning 503) or 400-599")
	}
	return nil
}

// failNow draws whether this call is answered with the error fault.
func (f Faults) failNow() bool {
	return f.ErrorRate > 0 && rand.Float64() < f.ErrorRate
}

func (f Faults) errorStatus() int {
	if f.ErrorStatus == 0 {
		return defaultFaultStatus
	}
	return f.ErrorStatus
}

func (f Faults) latency() time.Duration {
	return time.Duration(f.LatencyMS) * time.Millisecond
}

// dropConnection closes the client's connection without writing a response,
// so the caller cannot tell whether its charge or refund was made.
func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// HTTP/2 or a wrapped writer cannot be hijacked; aborting the handler
		// resets the stream instead, which the client sees the same way.
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}
