package console

import (
	"context"
	"errors"
	"net/http"
	"sort"

	"github.com/go-chi/chi/v5"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/refunds"
	"github.com/acme/paymentsvc/internal/webhook"
)

// timelineItem is one audit row on a payment's page: the payment's own, or
// one of its refunds' (Subject names which).
type timelineItem struct {
	lifecycle.Audit
	Kind string // "payment" or "refund"
}

type metaEntry struct{ Key, Value string }

// paymentData is everything a payment's page shows. Captures, Voids and
// Deliveries have their sections and rows (capture-row, void-row,
// delivery-row) in the template already; loadPayment fills them once
// captures, voids and merchant deliveries exist.
type paymentData struct {
	P          attempts.Attempt
	Metadata   []metaEntry
	Timeline   []timelineItem
	Refunds    []refunds.Refund
	Captures   []any
	Voids      []any
	Events     []outbox.Written
	Webhooks   []webhook.Received
	Deliveries []any
	Anomalies  []attempts.Recorded
	// What the page offers (the role decides too, in the template).
	CanSync    bool
	CanRefund  bool
	Refundable int64
}

// errNoPayment is a payment id that names none.
var errNoPayment = errors.New("no such payment")

// loadPayment reads payment id and everything about it, each from the
// package that owns it.
func (s *server) loadPayment(ctx context.Context, id string) (*paymentData, error) {
	p, err := attempts.Get(ctx, s.Pool, id)
	if errors.Is(err, attempts.ErrNotFound) {
		return nil, errNoPayment
	} else if err != nil {
		return nil, err
	}
	d := &paymentData{P: p, Refundable: p.Refundable()}
	d.CanSync = p.Status == lifecycle.Pending || p.Status == lifecycle.Unknown
	d.CanRefund = d.Refundable > 0
	for k, v := range p.Metadata {
		d.Metadata = append(d.Metadata, metaEntry{k, v})
	}
	sort.Slice(d.Metadata, func(i, j int) bool { return d.Metadata[i].Key < d.Metadata[j].Key })
	own, err := attempts.Timeline(ctx, s.Pool, id)
	if err != nil {
		return nil, err
	}
	if d.Refunds, err = refunds.OfPayment(ctx, s.Pool, id); err != nil {
		return nil, err
	}
	ofRefunds, err := refunds.TimelineOfPayment(ctx, s.Pool, id, d.Refunds)
	if err != nil {
		return nil, err
	}
	d.Timeline = mergeTimeline(own, ofRefunds)
	if d.Events, err = outbox.OfPayment(ctx, s.Pool, id); err != nil {
		return nil, err
	}
	if d.Webhooks, err = webhook.ReceivedFor(ctx, s.Pool, id); err != nil {
		return nil, err
	}
	if d.Anomalies, err = attempts.AnomaliesOf(ctx, s.Pool, id); err != nil {
		return nil, err
	}
	return d, nil
}

// mergeTimeline is the payment's audit rows and its refunds', oldest
// first; at the same instant the payment's come first (each list is in
// the order it was written).
func mergeTimeline(own, ofRefunds []lifecycle.Audit) []timelineItem {
	out := make([]timelineItem, 0, len(own)+len(ofRefunds))
	for _, a := range own {
		out = append(out, timelineItem{Audit: a, Kind: "payment"})
	}
	for _, a := range ofRefunds {
		out = append(out, timelineItem{Audit: a, Kind: "refund"})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// paymentPage is /console/payments/{id}.
func (s *server) paymentPage(w http.ResponseWriter, r *http.Request) {
	s.showPayment(w, r, http.StatusOK, nil)
}

// showPayment answers the page of the payment in the path with status and
// the flash of an action, if any.
func (s *server) showPayment(w http.ResponseWriter, r *http.Request, status int, f *flash) {
	id := chi.URLParam(r, "id")
	d, err := s.loadPayment(r.Context(), id)
	if errors.Is(err, errNoPayment) {
		s.fail(w, r, http.StatusNotFound, "There is no payment "+id+".")
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	s.render(w, r, status, "payment", view{Title: "Payment " + id, Nav: "payments", Flash: f, Data: d})
}
