package api

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/acme/paymentsvc/internal/reqlog"
)

// BenchmarkObserve is the cost of the observe middleware (middleware.go)
// around a handler that only names the tenant and payment, logging to
// io.Discard.
func BenchmarkObserve(b *testing.B) {
	s := &server{log: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	r := chi.NewRouter()
	r.Use(s.observe)
	r.Get("/v1/payments/{id}", func(w http.ResponseWriter, r *http.Request) {
		f := reqlog.From(r.Context())
		f.TenantID, f.PaymentID = "ten_1", "pay_1"
	})
	req := httptest.NewRequest(http.MethodGet, "/v1/payments/pay_1", nil)
	req.Header.Set("X-Request-Id", "req_bench")
	b.ReportAllocs()
	for b.Loop() {
		r.ServeHTTP(httptest.NewRecorder(), req)
	}
}
