package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/refunds"
)

// Actions go through the payments service like the API's requests (no
// second path to the money), with source "console" and the operator's
// email in the audit reason. Each answers the page it acted on, with the
// outcome in the flash.

// formKey is the form's idempotency key, minted when its page was
// rendered; "" if the form has none.
func formKey(r *http.Request) string { return strings.TrimSpace(r.PostFormValue(keyField)) }

// syncPayment is Sync with provider: ask the provider what became of a
// PENDING or UNKNOWN payment, under its idempotency key like a retry.
// Sending the form twice asks twice and changes the payment at most once.
func (s *server) syncPayment(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	op := sessionOf(r.Context()).Operator
	p, ok := s.payment(w, r, id)
	if !ok {
		return
	}
	if p.Status != lifecycle.Pending && p.Status != lifecycle.Unknown {
		s.showPayment(w, r, http.StatusConflict, &flash{Text: fmt.Sprintf("Nothing to sync: the payment is %s (only PENDING and UNKNOWN payments are synced).", p.Status)})
		return
	}
	after, outcome, err := s.Payments.Sync(r.Context(), id, payments.SyncOptions{Source: lifecycle.SourceConsole, Actor: op.Email})
	s.Log.InfoContext(r.Context(), "console: sync", "operator", op.Email, "payment_id", id, "outcome", outcome.String(), "err", err)
	var f flash
	status := http.StatusOK
	switch {
	case outcome == payments.Unreachable || err != nil:
		status, f.Text = http.StatusServiceUnavailable, "The provider could not be asked; nothing changed. Try again later."
	case outcome == payments.Busy:
		status, f.Text = http.StatusConflict, "A request is working on this payment right now; nothing changed. Try again in a few seconds."
	case outcome == payments.StillUnknown:
		f.OK, f.Text = true, fmt.Sprintf("The provider has no final answer yet; the payment is still %s.", after.Status)
	case p.Status == after.Status:
		f.OK, f.Text = true, fmt.Sprintf("The payment is %s; nothing changed.", after.Status)
	default:
		f.OK, f.Text = true, fmt.Sprintf("Synced with provider: the payment went from %s to %s.", p.Status, after.Status)
	}
	s.showPayment(w, r, status, &f)
}

// payment reads payment id for an action; false (answered) if there is
// none or it cannot be read.
func (s *server) payment(w http.ResponseWriter, r *http.Request, id string) (attempts.Attempt, bool) {
	p, err := attempts.Get(r.Context(), s.Pool, id)
	if errors.Is(err, attempts.ErrNotFound) {
		s.fail(w, r, http.StatusNotFound, "There is no payment "+id+".")
		return p, false
	} else if err != nil {
		s.internal(w, r, err)
		return p, false
	}
	return p, true
}

// refundReasons are the reasons a refund may give (as in the API).
var refundReasons = []string{"requested_by_customer", "duplicate", "fraudulent", "other"}

// refundPayment is Refund: POST /v1/payments/{id}/refunds as the payment's
// tenant would send it, with the form's key (in its own "console_" space
// of the tenant's keys), so the form sent twice refunds once and the
// second answer is the first one replayed.
func (s *server) refundPayment(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	op := sessionOf(r.Context()).Operator
	key := formKey(r)
	amount, err := strconv.ParseInt(strings.TrimSpace(r.PostFormValue("amount")), 10, 64)
	reason := r.PostFormValue("reason")
	switch {
	case key == "":
		s.showPayment(w, r, http.StatusBadRequest, &flash{Text: "The form has no idempotency key; reload the page and try again."})
		return
	case err != nil || amount <= 0:
		s.showPayment(w, r, http.StatusBadRequest, &flash{Text: "Amount must be a whole number of minor units, more than 0."})
		return
	case reason != "" && !slices.Contains(refundReasons, reason):
		s.showPayment(w, r, http.StatusBadRequest, &flash{Text: "Reason must be one of " + strings.Join(refundReasons, ", ") + "."})
		return
	}
	p, ok := s.payment(w, r, id)
	if !ok {
		return
	}
	in, err := refundInput(p, "console_"+key, amount, reason)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	in.Origin = payments.Origin{Source: lifecycle.SourceConsole, Actor: op.Email}
	reply, err := s.Payments.Refund(r.Context(), in)
	s.Log.InfoContext(r.Context(), "console: refund", "operator", op.Email, "payment_id", id, "amount", amount,
		"refund_id", reply.RefundID, "replayed", reply.Replayed, "err", err)
	if err != nil {
		e := apperr.As(err)
		if e.Code == apperr.Internal {
			s.internal(w, r, err)
			return
		}
		s.showPayment(w, r, e.Code.HTTPStatus(), &flash{Text: "Refund refused: " + e.Detail})
		return
	}
	var rf refunds.View
	if err := json.Unmarshal(reply.Body, &rf); err != nil {
		s.internal(w, r, err)
		return
	}
	f := flash{OK: rf.Status != lifecycle.Failed, Text: fmt.Sprintf("Refund %s of %d %s: %s.", rf.ID, rf.Amount, rf.Currency, rf.Status)}
	if rf.Status == lifecycle.Failed && rf.FailureCode != nil {
		f.Text = fmt.Sprintf("Refund %s of %d %s: FAILED (%s).", rf.ID, rf.Amount, rf.Currency, *rf.FailureCode)
	}
	if reply.Replayed {
		f.Text += " This form had been sent already: nothing was done again."
	}
	s.showPayment(w, r, http.StatusOK, &f)
}

// refundInput is the refund the API would take for this body (see
// operationRequest).
func refundInput(p attempts.Attempt, key string, amount int64, reason string) (payments.RefundInput, error) {
	in := payments.RefundInput{Amount: &amount}
	body := map[string]any{"amount": amount}
	if reason != "" {
		in.Reason = &reason
		body["reason"] = reason
	}
	var err error
	in.OperationRequest, err = operationRequest(p, key, "refunds", body)
	return in, err
}
