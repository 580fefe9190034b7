package api

import (
	"net/http"
	"strconv"
)

// syncParam reads the ?sync of GET /v1/payments/{id}, /v1/refunds/{id},
// /v1/captures/{id} and /v1/voids/{id}:
// absent is false; the spellings of strconv.ParseBool (true, false, 1, 0,
// t, f, in lower, upper or title case) say what they say; anything else,
// an empty value included, is refused rather than taken as false.
func syncParam(r *http.Request) (bool, error) {
	q := r.URL.Query()
	if !q.Has("sync") {
		return false, nil
	}
	on, err := strconv.ParseBool(q.Get("sync"))
	if err != nil {
		return false, invalid("sync must be true or false (or 1, 0, t, f)")
	}
	return on, nil
}
