package api

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/ids"
	"github.com/acme/paymentsvc/internal/metrics"
	"github.com/acme/paymentsvc/internal/reqlog"
	"github.com/acme/paymentsvc/internal/tracing"
)

func requestID(ctx context.Context) string { return reqlog.From(ctx).RequestID }

var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._:\-]{1,128}$`)

// observe gives every request an id (X-Request-Id honoured if sane, else
// generated, and echoed), then logs one line and records metrics for it,
// and (tracing on) names its span after the route. Its context is one
// db.WithStallScope: once one of its database calls gets no answer within
// DATABASE_TIMEOUT, the rest fail at once, so the request answers 503
// within that one wait.
func (s *server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if !requestIDRE.MatchString(id) {
			id = ids.New("req_", 12)
		}
		w.Header().Set("X-Request-Id", id)
		fields := &reqlog.Fields{RequestID: id}
		ctx := db.WithStallScope(reqlog.With(r.Context(), fields))
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			if p := recover(); p != nil {
				s.log.ErrorContext(ctx, "panic serving request", "request_id", id, "panic", p)
				if !rec.wrote {
					apperr.Write(rec, apperr.New(apperr.Internal, "internal error"))
				}
			}
			route := chi.RouteContext(ctx).RoutePattern()
			if route == "" {
				route = "unmatched"
			}
			method := methodLabel(r.Method)
			nameSpan(ctx, method, route, fields)
			elapsed := time.Since(start)
			metrics.HTTPRequests.WithLabelValues(route, method, strconv.Itoa(rec.status)).Inc()
			metrics.HTTPDuration.WithLabelValues(route, method).Observe(elapsed.Seconds())
			// Room for the two optional fields: appending them never copies.
			attrs := make([]slog.Attr, 0, 8)
			attrs = append(attrs,
				slog.String("request_id", id), slog.String("method", r.Method), slog.String("route", route),
				slog.String("path", r.URL.Path), slog.Int("status", rec.status),
				slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
			)
			if fields.TenantID != "" {
				attrs = append(attrs, slog.String("tenant_id", fields.TenantID))
			}
			if fields.PaymentID != "" {
				attrs = append(attrs, slog.String("payment_id", fields.PaymentID))
			}
			s.log.LogAttrs(ctx, slog.LevelInfo, "request", attrs...)
		}()
		next.ServeHTTP(rec, r.WithContext(ctx))
	})
}

// nameSpan names the request's span (tracing on) after its route and adds
// what the handlers learnt: the tenant and the payment. Never the API key,
// secrets or the body. method is the method's label (methodLabel).
func nameSpan(ctx context.Context, method, route string, f *reqlog.Fields) {
	if !tracing.Enabled() {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if route == "unmatched" {
		route = ""
	}
	attrs := []attribute.KeyValue{tracing.AttrRequestID.String(f.RequestID)}
	if f.TenantID != "" {
		attrs = append(attrs, tracing.AttrTenantID.String(f.TenantID))
	}
	if f.PaymentID != "" {
		attrs = append(attrs, tracing.AttrPaymentID.String(f.PaymentID))
	}
	tracing.NameRequest(span, method, route, attrs...)
}

// standardMethods are the methods a metric label may name (RFC 9110's and
// PATCH); any other is counted as "other". Labels come from fixed sets only:
// the method is sent before authentication, so a client could otherwise
// create series without end. The route is the router's pattern or
// "unmatched" for the same reason.
var standardMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
	http.MethodConnect: true, http.MethodTrace: true,
}

func methodLabel(method string) string {
	if standardMethods[method] {
		return method
	}
	return "other"
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
