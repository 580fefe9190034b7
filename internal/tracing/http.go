package tracing

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Handler traces h's requests under /v1/ (the API and the webhooks; health
// checks, metrics scrapes and the spec are left out), continuing an incoming
// W3C traceparent. The span is named by its method until the router knows
// the route; NameRequest then renames it. Off, h is returned as is.
func Handler(h http.Handler) http.Handler {
	if !Enabled() {
		return h
	}
	return otelhttp.NewHandler(h, "http.server",
		otelhttp.WithFilter(func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/v1/") }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }),
	)
}

// NameRequest names the request's span after its route ("POST
// /v1/payments"; the method alone for an unmatched path) and adds attrs.
// It costs one context lookup when tracing is off.
func NameRequest(span trace.Span, method, route string, attrs ...attribute.KeyValue) {
	if !span.IsRecording() {
		return
	}
	if route != "" {
		span.SetName(method + " " + route)
		span.SetAttributes(attribute.String("http.route", route))
	}
	span.SetAttributes(attrs...)
}

// Transport traces each HTTP request sent through rt as a client span named
// "<peer> <METHOD> <path>", a child of the caller's span, and sends the
// caller's traceparent with it. Every try of a retried call is its own span.
// Off, rt is returned as is: nothing is added to the requests.
func Transport(peer string, rt http.RoundTripper) http.RoundTripper {
	if !Enabled() {
		return rt
	}
	return otelhttp.NewTransport(rt,
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			return peer + " " + r.Method + " " + r.URL.Path
		}),
		otelhttp.WithSpanOptions(trace.WithAttributes(attribute.String("peer.service", peer))),
	)
}
