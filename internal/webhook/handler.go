package webhook

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/httpbody"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/metrics"
	"github.com/acme/paymentsvc/internal/refunds"
	"github.com/acme/paymentsvc/internal/reqlog"
	"github.com/acme/paymentsvc/internal/settings"
)

// Route is the pattern to mount Providers at: one path per provider.
const Route = "POST /v1/webhooks/{provider}"

// HeaderSignature carries the provider's signature of the body.
const HeaderSignature = "Sim-Signature"

// MaxBodyBytes is the largest webhook body accepted (413 beyond it).
const MaxBodyBytes = 256 << 10

// applyTimeout bounds the transaction that records and applies one event.
const applyTimeout = 10 * time.Second

// Providers routes each provider's webhooks (POST /v1/webhooks/{provider})
// to its Handler; an unknown provider is 404.
type Providers map[string]*Handler

func (ps Providers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, ok := ps[r.PathValue("provider")]
	if !ok {
		metrics.WebhookOutcomes.WithLabelValues("bad_request").Inc()
		apperr.Write(w, apperr.New(apperr.NotFound, "no such provider"))
		return
	}
	h.ServeHTTP(w, r)
}

// Handler receives one provider's webhooks: it verifies, deduplicates and
// applies each event. It is safe for concurrent use.
type Handler struct {
	pool     *db.Pool
	provider string
	secrets  []string
	log      *slog.Logger

	// Type is the API the provider speaks (settings.TypeSim, the default,
	// or settings.TypeStripe): a Stripe provider's events are Stripe
	// events signed with Stripe-Signature (see stripe.go).
	Type string

	// Now is the clock signatures are judged by; tests replace it.
	Now func() time.Time
	// SyncRefund, if set, resolves refund id by asking the provider; a
	// charge.refunded event has it called for the payment's unresolved
	// refunds after the event is recorded.
	SyncRefund func(ctx context.Context, refundID string) error
	// KeyTTL is IDEMPOTENCY_KEY_TTL (zero: idempotency.DefaultKeyTTL): a
	// payment or refund an event makes final keeps its key that long from
	// then, as if its answer were stored then.
	KeyTTL time.Duration
}

// NewHandler returns provider's Handler: it accepts events signed with any
// of secrets (blank ones are ignored; during rotation configure old and new).
func NewHandler(pool *db.Pool, provider string, secrets []string, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.Default()
	}
	var kept []string
	for _, s := range secrets {
		if s = strings.TrimSpace(s); s != "" {
			kept = append(kept, s)
		}
	}
	if len(kept) == 0 {
		log.Error("webhook: no signing secret configured, every webhook will be refused", "provider", provider)
	}
	return &Handler{pool: pool, provider: provider, secrets: kept, log: log.With("provider", provider), Now: time.Now}
}

// ServeHTTP handles POST /v1/webhooks/{provider} for its provider.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.refuse(w, apperr.New(apperr.MethodNotAllowed, "use POST"), "bad_request")
		return
	}
	body, err := httpbody.Read(r, MaxBodyBytes)
	if err != nil {
		if errors.Is(err, httpbody.ErrTooLarge) {
			h.refuse(w, apperr.New(apperr.PayloadTooLarge, "body larger than 256 KiB"), "bad_request")
			return
		}
		h.refuse(w, apperr.New(apperr.InvalidRequest, "could not read the body"), "bad_request")
		return
	}
	stripe := h.Type == settings.TypeStripe
	header := HeaderSignature
	if stripe {
		header = HeaderStripeSignature
	}
	if err := Verify(r.Header.Get(header), body, h.secrets, h.now(), Tolerance); err != nil {
		// The error names the reason only: never the header or a secret.
		h.log.Warn("webhook refused", "reason", err.Error(), "remote_addr", r.RemoteAddr)
		h.refuse(w, apperr.New(apperr.InvalidSignature, "%s", err.Error()), "bad_signature")
		return
	}
	ev, apply, err := h.parse(body)
	if err != nil {
		h.log.Warn("webhook refused", "reason", err.Error())
		h.refuse(w, apperr.New(apperr.InvalidRequest, "%s", err.Error()), "bad_request")
		return
	}
	if !apply {
		// A Stripe event of a type not applied (Stripe sends many) or a
		// refund still pending: acknowledged, nothing changes.
		metrics.WebhookOutcomes.WithLabelValues(outcomeIgnored).Inc()
		h.log.Info("webhook ignored", "event_id", ev.ID, "type", ev.Type)
		writeJSON(w, http.StatusOK, map[string]bool{"received": true})
		return
	}
	ev.provider = h.provider
	res, err := h.record(r.Context(), ev, body)
	if err != nil {
		h.log.Error("webhook not recorded", "event_id", ev.ID, "type", ev.Type, "err", err)
		metrics.WebhookOutcomes.WithLabelValues("error").Inc()
		// 5xx: the provider retries, and the event id keeps the retry safe.
		e := apperr.New(apperr.Internal, "the event could not be recorded; retry")
		if db.IsUnavailable(err) {
			e = apperr.NewDatabaseUnavailable()
		}
		apperr.Write(w, e)
		return
	}
	metrics.WebhookOutcomes.WithLabelValues(res.outcome).Inc()
	reqlog.From(r.Context()).PaymentID = res.attemptID
	switch {
	case res.moved != "" && res.captureID != "":
		metrics.CaptureTransitions.WithLabelValues(string(res.captureKind), string(res.moved), string(attempts.SourceWebhook)).Inc()
	case res.moved != "" && res.refundID != "":
		metrics.RefundTransitions.WithLabelValues(string(res.moved), string(attempts.SourceWebhook)).Inc()
	case res.moved != "":
		metrics.AttemptTransitions.WithLabelValues(string(res.moved), string(attempts.SourceWebhook)).Inc()
	}
	if res.syncRefunds {
		h.syncRefunds(r.Context(), res.attemptID)
	}
	h.log.Info("webhook received", "request_id", reqlog.From(r.Context()).RequestID, "event_id", ev.ID, "type", ev.Type,
		"charge_id", ev.chargeID(), "payment_id", res.attemptID, "refund_id", res.refundID, "capture_id", res.captureID, "outcome", res.outcome)
	writeJSON(w, http.StatusOK, map[string]bool{"received": true})
}

// parse reads the event body in the provider's format; apply is false for
// an event that is acknowledged without effect.
func (h *Handler) parse(body []byte) (ev event, apply bool, err error) {
	if h.Type == settings.TypeStripe {
		return parseStripeEvent(body)
	}
	ev, err = parseEvent(body)
	return ev, err == nil, err
}

// record runs process in one transaction. Once the event is authentic, the
// work is finished even if the provider hangs up, so its retry finds the
// event done instead of doing it again; applyTimeout still bounds it.
func (h *Handler) record(ctx context.Context, ev event, body []byte) (result, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), applyTimeout)
	defer cancel()
	var res result
	err := db.WithTx(ctx, h.pool, func(tx pgx.Tx) error {
		var err error
		if res, err = process(ctx, tx, ev, body); err != nil {
			return err
		}
		return h.startExpiry(ctx, tx, res)
	})
	return res, err
}

// startExpiry starts the expiry of the key of a payment, refund, capture or
// void whose answer res made final (§19: a key expires IDEMPOTENCY_KEY_TTL
// after its subject's final answer; a payment's create is answered for good
// at AUTHORIZED too), in the transaction that made it so.
func (h *Handler) startExpiry(ctx context.Context, tx pgx.Tx, res result) error {
	switch {
	case !res.moved.Answered():
		return nil
	case res.captureID != "":
		return idempotency.ResolvedCapture(ctx, tx, res.captureID, h.KeyTTL)
	case res.refundID != "":
		return idempotency.ResolvedRefund(ctx, tx, res.refundID, h.KeyTTL)
	default:
		return idempotency.ResolvedAttempt(ctx, tx, res.attemptID, h.KeyTTL)
	}
}

// syncRefunds asks the provider about payment paymentID's unresolved
// refunds. Failures are logged only: the event is recorded, and the
// reconciler resolves what this leaves.
func (h *Handler) syncRefunds(ctx context.Context, paymentID string) {
	if h.SyncRefund == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), applyTimeout)
	defer cancel()
	ids, err := refunds.UnresolvedOfPayment(ctx, h.pool, paymentID)
	if err != nil {
		h.log.Warn("webhook: list unresolved refunds", "payment_id", paymentID, "err", err)
		return
	}
	for _, id := range ids {
		if err := h.SyncRefund(ctx, id); err != nil {
			h.log.Warn("webhook: sync refund", "refund_id", id, "err", err)
		}
	}
}

func (h *Handler) now() time.Time {
	if h.Now == nil {
		return time.Now()
	}
	return h.Now()
}

// refuse answers a request that was not applied and counts it.
func (h *Handler) refuse(w http.ResponseWriter, e *apperr.Error, outcome string) {
	metrics.WebhookOutcomes.WithLabelValues(outcome).Inc()
	apperr.Write(w, e)
}
