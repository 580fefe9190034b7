package console

import (
	"context"
	"errors"
	"net/http"
	"sort"

	"github.com/go-chi/chi/v5"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/captures"
	"github.com/acme/paymentsvc/internal/delivery"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/refunds"
	"github.com/acme/paymentsvc/internal/webhook"
)

// timelineItem is one audit row on a payment's page: the payment's own, or
// one of its refunds', captures', voids' or merchant deliveries' (SubjectID
// names which).
type timelineItem struct {
	lifecycle.Audit
	Kind string // "payment", "refund", "capture", "void" or "delivery"
}

type metaEntry struct{ Key, Value string }

// paymentData is everything a payment's page shows.
type paymentData struct {
	P          attempts.Attempt
	Metadata   []metaEntry
	Timeline   []timelineItem
	Refunds    []refunds.Refund
	Captures   []captures.Capture
	Voids      []captures.Capture
	Events     []outbox.Written
	Webhooks   []webhook.Received
	Deliveries []delivery.PaymentDelivery
	Anomalies  []attempts.Recorded
	// What the page offers (the role decides too, in the template).
	CanSync    bool
	CanRefund  bool
	Refundable int64
	// CanHold: the payment is AUTHORIZED with no capture or void under
	// way, so Capture (at most Capturable) and Void are offered.
	CanHold    bool
	Capturable int64
}

// voidReasons are the reasons a void may give (as in the API).
var voidReasons = captures.VoidReasons

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
	holds, err := captures.ListOf(ctx, s.Pool, id)
	if err != nil {
		return nil, err
	}
	live := false
	kindOf := make(map[string]string, len(holds))
	for _, c := range holds {
		kindOf[c.ID] = string(c.Kind)
		if c.Kind == captures.KindVoid {
			d.Voids = append(d.Voids, c)
		} else {
			d.Captures = append(d.Captures, c)
		}
		live = live || c.Status != lifecycle.Failed
	}
	d.Capturable = p.Capturable()
	d.CanHold = p.Status == lifecycle.Authorized && !live && d.Capturable > 0
	ofHolds, err := captures.TimelineOfPayment(ctx, s.Pool, id)
	if err != nil {
		return nil, err
	}
	if d.Deliveries, err = delivery.OfPayment(ctx, s.Pool, id); err != nil {
		return nil, err
	}
	ofDeliveries, err := delivery.TimelineOfPayment(ctx, s.Pool, id)
	if err != nil {
		return nil, err
	}
	d.Timeline = mergeTimeline(
		kinded(own, func(string) string { return "payment" }),
		kinded(ofRefunds, func(string) string { return "refund" }),
		kinded(ofHolds, func(id string) string { return kindOf[id] }),
		kinded(ofDeliveries, func(string) string { return "delivery" }),
	)
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

// kinded is audit rows as timeline items, each of the kind kindOf names
// for its subject.
func kinded(rows []lifecycle.Audit, kindOf func(subjectID string) string) []timelineItem {
	out := make([]timelineItem, len(rows))
	for i, a := range rows {
		out[i] = timelineItem{Audit: a, Kind: kindOf(a.SubjectID)}
	}
	return out
}

// mergeTimeline is the payment's audit rows and those of its refunds,
// captures, voids and deliveries, oldest first; at the same instant the
// earlier list's come first (each list is in the order it was written).
func mergeTimeline(lists ...[]timelineItem) []timelineItem {
	var out []timelineItem
	for _, l := range lists {
		out = append(out, l...)
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
