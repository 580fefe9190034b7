package api

import (
	"net/http"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/ratelimit"
)

// limitTenant takes one token of the authenticated tenant's bucket
// (TENANT_RATE_LIMIT) before anything else of the request runs: a refused
// request never reaches its Idempotency-Key, so nothing is read, stored or
// locked for it and the same request may be sent again as is.
func (s *server) limitTenant(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ok, wait := s.RateLimit.Allow(tenantOf(r.Context()).ID); !ok {
			e := apperr.New(apperr.RateLimited, "this API key's tenant is over its request rate; retry after Retry-After seconds (nothing of this request was done or stored)")
			e.RetryAfter = ratelimit.RetryAfterSeconds(wait)
			s.writeError(w, r, e)
			return
		}
		next.ServeHTTP(w, r)
	})
}
