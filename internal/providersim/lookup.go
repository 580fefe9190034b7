package providersim

import (
	"net/http"
	"strconv"
)

// handleGetCharge is GET /v1/charges/{id}.
func (s *Server) handleGetCharge(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	ch, ok := s.st.charges[r.PathValue("id")]
	var c Charge
	if ok {
		c = *ch
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, s.log, errorf(codeResourceMissing, "no such charge"))
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// handleListCharges is GET /v1/charges: one charge by ?idempotency_key=K, or a
// list filtered by ?created_gte, ?created_lt (unix seconds) and ?reference.
func (s *Server) handleListCharges(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Has("idempotency_key") {
		s.chargeByKey(w, q.Get("idempotency_key"))
		return
	}
	gte, err := unixParam(q.Get("created_gte"), 0)
	if err != nil {
		writeError(w, s.log, errorf(codeInvalidRequest, "created_gte must be unix seconds"))
		return
	}
	lt, err := unixParam(q.Get("created_lt"), 1<<62)
	if err != nil {
		writeError(w, s.log, errorf(codeInvalidRequest, "created_lt must be unix seconds"))
		return
	}
	if gte > lt {
		writeError(w, s.log, errorf(codeInvalidRequest, "created_gte is after created_lt"))
		return
	}
	ref, byRef := q.Get("reference"), q.Has("reference")
	s.mu.Lock()
	data := s.st.sortedCharges(func(c *Charge) bool {
		return c.Created >= gte && c.Created < lt && (!byRef || c.Reference == ref)
	})
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
}

func (s *Server) chargeByKey(w http.ResponseWriter, key string) {
	s.mu.Lock()
	ch, _, ok := s.st.chargeByKey(key)
	var c Charge
	if ok {
		c = *ch
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, s.log, errorf(codeResourceMissing, "no charge was created with that idempotency key"))
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// unixParam parses an optional unix-seconds query parameter.
func unixParam(raw string, def int64) (int64, error) {
	if raw == "" {
		return def, nil
	}
	return strconv.ParseInt(raw, 10, 64)
}
