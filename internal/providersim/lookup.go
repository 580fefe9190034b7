package providersim

import (
	"net/http"
	"strconv"
)

// handleGetCharge is GET /v1/charges/{id}.
func (s *Server) handleGetCharge(w http.ResponseWriter, r *http.Request) {
	serveByID(s, w, r, s.st.charges, "charge")
}

// serveByID answers a copy of the object m holds under the path's {id}, or
// 404 resource_missing naming what.
func serveByID[T any](s *Server, w http.ResponseWriter, r *http.Request, m map[string]*T, what string) {
	serveFound(s, w, func() (*T, bool) {
		p, ok := m[r.PathValue("id")]
		return p, ok
	}, "no such "+what)
}

// serveFound answers a copy of the object find returns (find runs under the
// state's lock), or 404 resource_missing with missing as the message.
func serveFound[T any](s *Server, w http.ResponseWriter, find func() (*T, bool), missing string) {
	unlock := s.lock()
	p, ok := find()
	var found T
	if ok {
		found = *p
	}
	unlock()
	if !ok {
		writeError(w, s.log, errorf(codeResourceMissing, missing))
		return
	}
	writeJSON(w, http.StatusOK, found)
}

// maxListLimit bounds ?limit of GET /v1/charges.
const maxListLimit = 10000

// handleListCharges is GET /v1/charges: one charge by ?idempotency_key=K, or a
// list filtered by ?created_gte, ?created_lt (unix seconds) and ?reference,
// ordered by created then id. Without ?limit the list is whole; with it
// (1–10000) it is one page, with has_more, that ?starting_after=<charge id>
// continues after that charge (Stripe's cursor paging).
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
	limit := 0 // whole list
	if q.Has("limit") {
		if limit, err = strconv.Atoi(q.Get("limit")); err != nil || limit < 1 || limit > maxListLimit {
			writeError(w, s.log, errorf(codeInvalidRequest, "limit must be 1 to 10000"))
			return
		}
	}
	ref, byRef := q.Get("reference"), q.Has("reference")
	after := q.Get("starting_after")
	unlock := s.lock()
	var cursor *Charge
	if after != "" {
		if c, ok := s.st.charges[after]; ok {
			cc := *c
			cursor = &cc
		}
	}
	fetch := 0
	if limit > 0 {
		fetch = limit + 1 // one more tells whether there is more
	}
	data := s.st.sortedCharges(func(c *Charge) bool {
		return c.Created >= gte && c.Created < lt && (!byRef || c.Reference == ref) &&
			(cursor == nil || c.Created > cursor.Created || (c.Created == cursor.Created && c.ID > cursor.ID))
	}, fetch)
	unlock()
	if after != "" && cursor == nil {
		writeError(w, s.log, errorf(codeInvalidRequest, "starting_after names no charge"))
		return
	}
	hasMore := false
	if limit > 0 && len(data) > limit {
		data, hasMore = data[:limit], true
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data, "has_more": hasMore})
}

func (s *Server) chargeByKey(w http.ResponseWriter, key string) {
	serveFound(s, w, func() (*Charge, bool) {
		ch, _, ok := s.st.chargeByKey(key)
		return ch, ok
	}, "no charge was created with that idempotency key")
}

// unixParam parses an optional unix-seconds query parameter.
func unixParam(raw string, def int64) (int64, error) {
	if raw == "" {
		return def, nil
	}
	return strconv.ParseInt(raw, 10, 64)
}
