package providersim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acme/paymentsvc/internal/redact"
)

// Delivery policy: exponential backoff from webhookFirstBackoff, doubling up
// to webhookMaxBackoff, giving up after webhookMaxAttempts (about 35s in all),
// so a dead receiver costs a bounded amount of work per event.
const (
	webhookFirstBackoff   = 100 * time.Millisecond
	webhookMaxBackoff     = 5 * time.Second
	webhookMaxAttempts    = 12
	webhookAttemptTimeout = 10 * time.Second
	headerSignature       = "Sim-Signature"
	headerStripeSignature = "Stripe-Signature"
)

// notifyCharge sends a webhook event about ch, if webhooks are configured.
// It never blocks: the charge or refund answer does not wait for delivery.
func (s *Server) notifyCharge(eventType string, ch Charge) {
	s.notify(eventType, EventData{Charge: ch})
}

// notifyRefund sends refund.succeeded about re, if webhooks are configured.
func (s *Server) notifyRefund(re Refund) {
	s.notify(EventRefundSucceeded, EventData{Refund: &re})
}

func (s *Server) notify(eventType string, data EventData) {
	if s.hooks == nil {
		return
	}
	if s.cfg.API == APIStripe {
		s.notifyStripe(eventType, data)
		return
	}
	s.hooks.enqueue(Event{
		ID:      newID("evt_"),
		Type:    eventType,
		Created: s.now().Unix(),
		Data:    data,
	})
}

// chargeEventType is the event announcing a new charge.
func chargeEventType(ch *Charge) string {
	switch ch.Status {
	case StatusFailed:
		return EventChargeFailed
	case StatusAuthorized:
		return EventChargeAuthorized
	}
	return EventChargeSucceeded
}

// webhookSender delivers events, one goroutine per event, until close.
type webhookSender struct {
	url       string
	secret    string
	header    string // the signature's header: Sim-Signature or Stripe-Signature
	client    *http.Client
	log       *slog.Logger
	now       func() time.Time
	delivered func()
	queued    atomic.Int64 // events accepted for delivery, for tests

	ctx    context.Context // cancelled by close, ending every delivery
	cancel context.CancelFunc
	mu     sync.Mutex // guards closed against wg.Add racing wg.Wait
	closed bool
	wg     sync.WaitGroup
}

func newWebhookSender(url, secret, header string, log *slog.Logger, now func() time.Time, delivered func()) *webhookSender {
	ctx, cancel := context.WithCancel(context.Background())
	return &webhookSender{
		url:       url,
		secret:    secret,
		header:    header,
		client:    &http.Client{Timeout: webhookAttemptTimeout},
		log:       log,
		now:       now,
		delivered: delivered,
		ctx:       ctx,
		cancel:    cancel,
	}
}

// enqueue starts delivering ev in the background.
func (h *webhookSender) enqueue(ev Event) {
	body, err := json.Marshal(ev)
	if err != nil {
		h.log.Error("webhook not sent: encode event", "event_id", ev.ID, "err", err)
		return
	}
	h.enqueueBody(ev.ID, ev.Type, body)
}

// enqueueBody starts delivering an encoded event (id and type for the logs).
func (h *webhookSender) enqueueBody(id, typ string, body []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		h.log.Warn("webhook not sent: simulator closing", "event_id", id, "type", typ)
		return
	}
	h.queued.Add(1)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.deliver(id, typ, body)
	}()
}

// deliver posts body until a 2xx answer, the attempt limit, or close. Every
// attempt carries the same event id and body, signed afresh with the current time.
func (h *webhookSender) deliver(id, typ string, body []byte) {
	backoff := webhookFirstBackoff
	for attempt := 1; ; attempt++ {
		err := h.attempt(body)
		if err != nil {
			// Errors of net/http quote the URL, credentials included.
			err = errors.New(redact.Text(err.Error(), h.url))
		}
		if err == nil {
			h.delivered()
			h.log.Info("webhook delivered", "event_id", id, "type", typ, "attempt", attempt)
			return
		}
		if h.ctx.Err() != nil {
			h.log.Warn("webhook abandoned: simulator closing", "event_id", id, "attempt", attempt)
			return
		}
		if attempt == webhookMaxAttempts {
			h.log.Error("webhook given up", "event_id", id, "type", typ, "attempts", attempt, "err", err)
			return
		}
		h.log.Warn("webhook attempt failed", "event_id", id, "attempt", attempt, "retry_in", backoff.String(), "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-h.ctx.Done():
			t.Stop()
			h.log.Warn("webhook abandoned: simulator closing", "event_id", id, "attempt", attempt)
			return
		case <-t.C:
		}
		backoff = min(backoff*2, webhookMaxBackoff)
	}
}

// attempt makes one delivery; any answer but a 2xx is an error.
func (h *webhookSender) attempt(body []byte) error {
	req, err := http.NewRequestWithContext(h.ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(h.header, SignatureHeader(h.secret, h.now().Unix(), body))
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// Drain a little so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("receiver answered %d", resp.StatusCode)
	}
	return nil
}

// close abandons pending retries and in-flight attempts and waits for every
// delivery goroutine to return.
func (h *webhookSender) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
}
