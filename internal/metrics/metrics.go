// Package metrics defines the service's Prometheus metrics in one place, so
// names, labels and units stay consistent across packages.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry holds every metric of the process; /metrics serves it.
var Registry = prometheus.NewRegistry()

// Handler serves Registry in the Prometheus text format: GET /metrics, on
// the API's listener or on METRICS_ADDR's.
func Handler() http.Handler { return promhttp.HandlerFor(Registry, promhttp.HandlerOpts{}) }

func init() {
	Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

func register[C prometheus.Collector](c C) C {
	Registry.MustRegister(c)
	return c
}

// HTTP.
var (
	HTTPRequests = register(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paymentsvc_http_requests_total", Help: "HTTP requests by route pattern, method and status code.",
	}, []string{"route", "method", "code"}))
	HTTPDuration = register(prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "paymentsvc_http_request_duration_seconds", Help: "HTTP request latency by route pattern and method.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20},
	}, []string{"route", "method"}))
)

// Idempotency and attempts.
var (
	IdempotencyOutcomes = register(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paymentsvc_idempotency_outcomes_total",
		Help: "Idempotency-Key outcomes: created, resumed, replayed, in_use, reused_mismatch, order_conflict.",
	}, []string{"outcome"}))
	AttemptTransitions = register(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paymentsvc_attempt_transitions_total", Help: "Attempt transitions by resulting status and source.",
	}, []string{"status", "source"}))
	RefundTransitions = register(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paymentsvc_refund_transitions_total", Help: "Refund transitions by resulting status and source.",
	}, []string{"status", "source"}))
	CaptureTransitions = register(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paymentsvc_capture_transitions_total", Help: "Capture and void transitions by kind (capture, void), resulting status and source.",
	}, []string{"kind", "status", "source"}))
)

// Provider.
var (
	ProviderCalls = register(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paymentsvc_provider_calls_total", Help: "HTTP calls to a provider by provider, operation and result.",
	}, []string{"provider", "op", "result"}))
	ProviderCallDuration = register(prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "paymentsvc_provider_call_duration_seconds", Help: "Latency of single HTTP calls to a provider.",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2, 3, 5, 10},
	}, []string{"provider", "op"}))
	ProviderRetries = register(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paymentsvc_provider_retries_total", Help: "Provider calls retried after a retryable failure.",
	}, []string{"provider", "op"}))
	ProviderChargeOutcomes = register(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paymentsvc_provider_charge_outcomes_total", Help: "Charge outcomes by provider: succeeded, declined, unknown, not_sent.",
	}, []string{"provider", "outcome"}))
	ProviderRefundOutcomes = register(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paymentsvc_provider_refund_outcomes_total", Help: "Refund call outcomes by provider: succeeded, declined (refused), unknown, not_sent.",
	}, []string{"provider", "outcome"}))
	ProviderHoldOutcomes = register(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paymentsvc_provider_capture_outcomes_total", Help: "Capture and void call outcomes by provider and op (capture, void): succeeded, declined (refused), unknown, not_sent.",
	}, []string{"provider", "op", "outcome"}))
	BreakerState = register(prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "paymentsvc_provider_breaker_state", Help: "Circuit breaker state: 0 closed, 1 half-open, 2 open.",
	}, []string{"provider"}))
)

// Webhooks.
var (
	WebhookOutcomes = register(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paymentsvc_webhook_events_total",
		Help: "Webhook deliveries by outcome: applied, duplicate, noop, anomaly, unknown_charge, bad_signature, bad_request.",
	}, []string{"outcome"}))
)

// Outbox.
var (
	OutboxPending = register(prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "paymentsvc_outbox_pending", Help: "Outbox rows not yet published.",
	}))
	OutboxOldestAge = register(prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "paymentsvc_outbox_oldest_unpublished_age_seconds", Help: "Age of the oldest unpublished outbox row.",
	}))
	OutboxPublished = register(prometheus.NewCounter(prometheus.CounterOpts{
		Name: "paymentsvc_outbox_published_total", Help: "Outbox events published and acknowledged by JetStream.",
	}))
	OutboxPublishErrors = register(prometheus.NewCounter(prometheus.CounterOpts{
		Name: "paymentsvc_outbox_publish_errors_total", Help: "Outbox publish attempts that failed.",
	}))
)

// Merchant webhooks (internal/delivery).
var (
	MerchantWebhookAttempts = register(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paymentsvc_merchant_webhook_attempts_total",
		Help: "Attempts to deliver to a merchant's endpoint, by result: success (2xx), http_error (another status), timeout, connection_error, refused_address, shutdown.",
	}, []string{"result"}))
	MerchantWebhookAttemptDuration = register(prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "paymentsvc_merchant_webhook_attempt_duration_seconds", Help: "Latency of one attempt to deliver to a merchant's endpoint, by result.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30},
	}, []string{"result"}))
	MerchantWebhookDeliveries = register(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paymentsvc_merchant_webhook_deliveries_total",
		Help: "Merchant webhook deliveries that ended, by outcome: delivered (a 2xx), failed (retries exhausted, or an address refused).",
	}, []string{"outcome"}))
	MerchantWebhookPending = register(prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "paymentsvc_merchant_webhook_pending", Help: "Merchant webhook deliveries pending (the backlog), of every pod.",
	}))
	MerchantWebhookOldestAge = register(prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "paymentsvc_merchant_webhook_oldest_pending_age_seconds", Help: "Age of the oldest pending merchant webhook delivery.",
	}))
)

// Database.
var (
	DatabaseTimeouts = register(prometheus.NewCounter(prometheus.CounterOpts{
		Name: "paymentsvc_database_timeouts_total",
		Help: "Database statements, batches and COMMITs that got no answer within DATABASE_TIMEOUT (their connection was discarded).",
	}))
)
