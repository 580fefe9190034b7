// Package console is the operator console: server-rendered pages for the
// people who run the service (not the tenants), on a listener of its own
// (CONSOLE_ADDR). Templates and static files are embedded in the binary;
// html/template escapes everything that tenants, customers or providers
// wrote. Every action calls the same internal/payments methods as the API
// (source "console", the operator named in the audit reason), and every
// read goes through the package that owns the table. docs/console.md
// describes the pages, the roles and the security choices.
package console

import (
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/delivery"
	"github.com/acme/paymentsvc/internal/operators"
	"github.com/acme/paymentsvc/internal/payments"
)

// CookieName is the session cookie.
const CookieName = "psvc_console"

// Deps are what the console is built from.
type Deps struct {
	Pool     *db.Pool
	Payments *payments.Service
	Sessions *operators.Sessions
	Log      *slog.Logger
	// SecureCookie marks the session cookie Secure (CONSOLE_SECURE_COOKIE):
	// on wherever the console is reached over HTTPS.
	SecureCookie bool
	// Endpoints is the merchant webhooks' service, whose manual retry the
	// console's Retry calls (nil: one on Pool).
	Endpoints *delivery.Endpoints
}

type server struct {
	Deps
	pages *pages
}

// New returns the console's handler: every path under /console/ (anything
// else is 404).
func New(d Deps) http.Handler {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Endpoints == nil {
		d.Endpoints = delivery.NewEndpoints(d.Pool, delivery.EndpointsConfig{})
	}
	s := &server{Deps: d, pages: loadPages()}
	r := chi.NewRouter()
	r.Use(secureHeaders, s.sameOrigin)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) { s.fail(w, r, http.StatusNotFound, "No such page.") })
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusMethodNotAllowed, "This page does not take that method.")
	})
	r.Get("/console", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/console/", http.StatusSeeOther) })
	r.Handle("/console/static/*", http.StripPrefix("/console/", http.FileServerFS(staticFS)))
	r.Get("/console/login", s.loginPage)
	r.Post("/console/login", s.login)
	r.Group(func(r chi.Router) {
		r.Use(s.session)
		r.Post("/console/logout", s.logout)
		r.Get("/console/", s.overview)
		r.Get("/console/payments", s.paymentList)
		r.Get("/console/payments/{id}", s.paymentPage)
		r.Get("/console/anomalies", s.anomalyList)
		r.Get("/console/tenants", s.tenantList)
		r.With(s.allow(operators.Operator)).Post("/console/payments/{id}/sync", s.syncPayment)
		r.With(s.allow(operators.Operator)).Post("/console/payments/{id}/refunds", s.refundPayment)
		r.With(s.allow(operators.Operator)).Post("/console/payments/{id}/captures", s.capturePayment)
		r.With(s.allow(operators.Operator)).Post("/console/payments/{id}/voids", s.voidPayment)
		r.With(s.allow(operators.Operator)).Post("/console/payments/{id}/deliveries/{delivery}/retry", s.retryDelivery)
		r.With(s.allow(operators.Operator)).Post("/console/anomalies/{id}/resolve", s.resolveAnomaly)
		r.With(s.allow(operators.Admin)).Post("/console/tenants", s.createTenant)
		r.With(s.allow(operators.Admin)).Get("/console/operators", s.operatorList)
	})
	return r
}
