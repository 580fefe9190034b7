// Package api is the HTTP surface of paymentsvc: the chi router, tenant
// authentication, request decoding, problem+json errors and the handlers.
package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/delivery"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/metrics"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/ratelimit"
	"github.com/acme/paymentsvc/internal/reqlog"
	"github.com/acme/paymentsvc/internal/tenants"
	"github.com/acme/paymentsvc/internal/tracing"
)

// Deps are what the API is built from.
type Deps struct {
	Pool     *db.Pool
	Payments *payments.Service
	Webhooks http.Handler // POST /v1/webhooks/{provider}
	OpenAPI  []byte       // served at /openapi.yaml
	Draining *atomic.Bool // set during shutdown: /readyz answers 503
	Log      *slog.Logger
	// RateLimit is the per-tenant token bucket of the tenant API; nil: off.
	RateLimit *ratelimit.Limiter
	// Auth authenticates API keys; nil: a cache with the defaults
	// (tenants.NewCache).
	Auth *tenants.Cache
	// MetricsElsewhere leaves GET /metrics out (404): a listener of its
	// own serves it (METRICS_ADDR).
	MetricsElsewhere bool
	// Endpoints are the merchant webhooks' endpoints and deliveries; nil:
	// the defaults (https:// only, keys kept payments.DefaultKeyTTL).
	Endpoints *delivery.Endpoints
}

type server struct {
	Deps
	log *slog.Logger
}

// New returns the service's HTTP handler; with tracing on, requests under
// /v1/ are traced (tracing.Handler), continuing an incoming traceparent.
func New(d Deps) http.Handler {
	if d.Auth == nil {
		d.Auth = tenants.NewCache(d.Pool, tenants.CacheConfig{})
	}
	if d.Endpoints == nil {
		d.Endpoints = delivery.NewEndpoints(d.Pool, delivery.EndpointsConfig{
			Keys: idempotency.Config{LockTTL: payments.DefaultLockTTL, KeyTTL: payments.DefaultKeyTTL},
		})
	}
	if d.Draining == nil {
		d.Draining = new(atomic.Bool)
	}
	s := &server{Deps: d, log: d.Log}
	r := chi.NewRouter()
	r.Use(s.observe)
	r.Use(middleware.GetHead) // HEAD of every GET endpoint, answered without a body
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		apperr.Write(w, apperr.New(apperr.NotFound, "no such endpoint"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", allowed(r, req.URL.Path))
		apperr.Write(w, apperr.New(apperr.MethodNotAllowed, "method not allowed on this endpoint"))
	})
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", s.ready)
	if !s.MetricsElsewhere {
		r.Method(http.MethodGet, "/metrics", metrics.Handler())
	}
	r.Get("/openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(s.OpenAPI)
	})
	if s.Webhooks != nil {
		r.Method(http.MethodPost, "/v1/webhooks/{provider}", s.Webhooks)
	}
	// The tenant API: authenticated, then rate limited per tenant, before
	// any handler reads its Idempotency-Key.
	r.Group(func(r chi.Router) {
		r.Use(s.authenticate)
		if s.RateLimit != nil {
			r.Use(s.limitTenant)
		}
		r.Post("/v1/payments", s.createPayment)
		r.Get("/v1/payments", s.listPayments)
		r.Get("/v1/payments/{id}", s.getPayment)
		r.Post("/v1/payments/{id}/refunds", s.createRefund)
		r.Get("/v1/payments/{id}/refunds", s.listRefunds)
		r.Get("/v1/refunds/{id}", s.getRefund)
		r.Post("/v1/payments/{id}/captures", s.createCapture)
		r.Post("/v1/payments/{id}/voids", s.createVoid)
		r.Get("/v1/captures/{id}", s.getCapture)
		r.Get("/v1/voids/{id}", s.getVoid)
		r.Put("/v1/routing", s.putRouting)
		r.Get("/v1/routing", s.getRouting)
		r.Post("/v1/webhook_endpoints", s.createEndpoint)
		r.Get("/v1/webhook_endpoints", s.listEndpoints)
		r.Get("/v1/webhook_endpoints/{id}", s.getEndpoint)
		r.Delete("/v1/webhook_endpoints/{id}", s.deleteEndpoint)
		r.Post("/v1/webhook_endpoints/{id}/rotate_secret", s.rotateSecret)
		r.Get("/v1/webhook_endpoints/{id}/deliveries", s.listDeliveries)
		r.Post("/v1/webhook_deliveries/{id}/retry", s.retryDelivery)
	})
	return tracing.Handler(r)
}

// allowMethods are the methods a 405's Allow header may name, in order.
var allowMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// allowed is the Allow header of a 405 for path: the methods routes has for
// it, and HEAD wherever GET is (middleware.GetHead).
func allowed(routes chi.Routes, path string) string {
	var ms []string
	for _, m := range allowMethods {
		if routes.Match(chi.NewRouteContext(), m, path) {
			ms = append(ms, m)
			if m == http.MethodGet {
				ms = append(ms, http.MethodHead)
			}
		}
	}
	return strings.Join(ms, ", ")
}

// ready is /readyz: 200 while the database answers a ping, connection
// included, within one DATABASE_TIMEOUT (the pool bounds each of the two
// waits, and Bound both together), else 503 within that bound.
func (s *server) ready(w http.ResponseWriter, r *http.Request) {
	if s.Draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
		return
	}
	ctx, cancel := s.Pool.Bound(r.Context())
	defer cancel()
	if err := s.Pool.Ping(ctx); err != nil {
		s.log.WarnContext(ctx, "readiness: database unreachable", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "database unreachable"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

type tenantKey struct{}

// authenticate resolves the bearer API key to a tenant; nothing else is
// read or written for a request without a valid key.
func (s *server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			s.writeError(w, r, apperr.New(apperr.Unauthorized, "a valid API key is required: Authorization: Bearer sk_…"))
			return
		}
		t, err := s.Auth.Authenticate(r.Context(), key)
		if errors.Is(err, tenants.ErrUnauthorized) {
			s.writeError(w, r, apperr.New(apperr.Unauthorized, "a valid API key is required: Authorization: Bearer sk_…"))
			return
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		reqlog.From(r.Context()).TenantID = t.ID
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, t)))
	})
}

func tenantOf(ctx context.Context) tenants.Tenant {
	t, _ := ctx.Value(tenantKey{}).(tenants.Tenant)
	return t
}

func bearer(h string) (string, bool) {
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	key := strings.TrimSpace(h[len(prefix):])
	return key, key != ""
}
