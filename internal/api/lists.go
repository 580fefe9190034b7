package api

import (
	"net/http"
	"strconv"
)

// Lists are newest first, limit 1–100 (default 10), continued after the id
// of the last item seen (starting_after): keyset pagination, never OFFSET.
const (
	defaultLimit = 10
	maxLimit     = 100
)

// listBody is a page of a list.
type listBody[T any] struct {
	Data    []T  `json:"data"`
	HasMore bool `json:"has_more"`
}

// page is a list request's paging.
type page struct {
	limit int
	after string // "" for the first page
}

func pageOf(r *http.Request) (page, error) {
	q := r.URL.Query()
	p := page{limit: defaultLimit, after: q.Get("starting_after")}
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > maxLimit {
			return page{}, invalid("limit must be an integer from 1 to %d", maxLimit)
		}
		p.limit = n
	}
	if q.Has("starting_after") && p.after == "" {
		return page{}, invalid("starting_after must name an item")
	}
	return p, nil
}
