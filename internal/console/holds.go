package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/payments"
)

// Capture, Void and a merchant delivery's Retry: the calls of POST
// /v1/payments/{id}/captures, …/voids and /v1/webhook_deliveries/{id}/retry,
// like Refund (actions.go).

// capturePayment is Capture: POST /v1/payments/{id}/captures with
// {"amount":N} as the payment's tenant would send it (a partial capture
// releases the rest), under the form's key in the "console_" space, so the
// form sent twice captures once.
func (s *server) capturePayment(w http.ResponseWriter, r *http.Request) {
	key := formKey(r)
	amount, err := strconv.ParseInt(strings.TrimSpace(r.PostFormValue("amount")), 10, 64)
	switch {
	case key == "":
		s.showPayment(w, r, http.StatusBadRequest, &flash{Text: "The form has no idempotency key; reload the page and try again."})
		return
	case err != nil || amount <= 0:
		s.showPayment(w, r, http.StatusBadRequest, &flash{Text: "Amount must be a whole number of minor units, more than 0."})
		return
	}
	s.hold(w, r, "captures", map[string]any{"amount": amount}, func(req payments.OperationRequest) (payments.Reply, error) {
		return s.Payments.Capture(r.Context(), payments.CaptureInput{OperationRequest: req, Amount: &amount})
	})
}

// voidPayment is Void: POST /v1/payments/{id}/voids with the reason chosen
// (none: {}), like capturePayment.
func (s *server) voidPayment(w http.ResponseWriter, r *http.Request) {
	key := formKey(r)
	reason := r.PostFormValue("reason")
	switch {
	case key == "":
		s.showPayment(w, r, http.StatusBadRequest, &flash{Text: "The form has no idempotency key; reload the page and try again."})
		return
	case reason != "" && !slices.Contains(voidReasons, reason):
		s.showPayment(w, r, http.StatusBadRequest, &flash{Text: "Reason must be one of " + strings.Join(voidReasons, ", ") + ", or none."})
		return
	}
	body := map[string]any{}
	var in payments.VoidInput
	if reason != "" {
		body["reason"], in.Reason = reason, &reason
	}
	s.hold(w, r, "voids", body, func(req payments.OperationRequest) (payments.Reply, error) {
		in.OperationRequest = req
		return s.Payments.Void(r.Context(), in)
	})
}

// hold runs a capture or void (route "captures" or "voids", the API's body
// body) of the payment in the path through run, and answers its page with
// the outcome.
func (s *server) hold(w http.ResponseWriter, r *http.Request, route string, body map[string]any, run func(payments.OperationRequest) (payments.Reply, error)) {
	id := chi.URLParam(r, "id")
	op := sessionOf(r.Context()).Operator
	p, ok := s.payment(w, r, id)
	if !ok {
		return
	}
	req, err := operationRequest(p, "console_"+formKey(r), route, body)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	req.Origin = payments.Origin{Source: lifecycle.SourceConsole, Actor: op.Email}
	reply, err := run(req)
	what := map[string]string{"captures": "Capture", "voids": "Void"}[route]
	s.Log.InfoContext(r.Context(), "console: "+strings.ToLower(what), "operator", op.Email, "payment_id", id, "body", body,
		"operation_id", reply.OperationID, "replayed", reply.Replayed, "err", err)
	if err != nil {
		e := apperr.As(err)
		if e.Code == apperr.Internal {
			s.internal(w, r, err)
			return
		}
		s.showPayment(w, r, e.Code.HTTPStatus(), &flash{Text: what + " refused: " + e.Detail})
		return
	}
	var c struct {
		ID          string           `json:"id"`
		Amount      int64            `json:"amount"`
		Currency    string           `json:"currency"`
		Status      lifecycle.Status `json:"status"`
		Reason      *string          `json:"reason"`
		FailureCode *string          `json:"failure_code"`
	}
	if err := json.Unmarshal(reply.Body, &c); err != nil {
		s.internal(w, r, err)
		return
	}
	f := flash{OK: c.Status != lifecycle.Failed}
	if route == "captures" {
		f.Text = fmt.Sprintf("Capture %s of %d %s: %s", c.ID, c.Amount, c.Currency, c.Status)
	} else {
		f.Text = fmt.Sprintf("Void %s: %s", c.ID, c.Status)
	}
	if c.FailureCode != nil {
		f.Text += " (" + *c.FailureCode + ")"
	}
	f.Text += "."
	if reply.Replayed {
		f.Text += " This form had been sent already: nothing was done again."
	}
	s.showPayment(w, r, http.StatusOK, &f)
}

// operationRequest is the request the API would make of a POST to the
// payment's route ("refunds", "captures", "voids") with body and key,
// fingerprinted as the API fingerprints it (its concrete path and
// canonical JSON), so the same key with another body is refused as there.
func operationRequest(p attempts.Attempt, key, route string, body map[string]any) (payments.OperationRequest, error) {
	req := payments.OperationRequest{TenantID: p.TenantID, PaymentID: p.ID, IdempotencyKey: key}
	raw, err := json.Marshal(body)
	if err != nil {
		return req, err
	}
	req.Fingerprint, err = idempotency.Fingerprint(http.MethodPost, "/v1/payments/"+p.ID+"/"+route, raw)
	return req, err
}

// retryDelivery is a merchant delivery's Retry: the deliveries API's
// manual retry (due now, a fresh schedule), audited with source console and
// the operator; the form sent twice retries once.
func (s *server) retryDelivery(w http.ResponseWriter, r *http.Request) {
	id, deliveryID := chi.URLParam(r, "id"), chi.URLParam(r, "delivery")
	op := sessionOf(r.Context()).Operator
	key := formKey(r)
	if key == "" {
		s.showPayment(w, r, http.StatusBadRequest, &flash{Text: "The form has no idempotency key; reload the page and try again."})
		return
	}
	d, replayed, err := s.Endpoints.RetryByOperator(r.Context(), id, deliveryID, op.Email, key)
	s.Log.InfoContext(r.Context(), "console: retry delivery", "operator", op.Email, "payment_id", id, "delivery_id", deliveryID,
		"replayed", replayed, "err", err)
	if err != nil {
		e := apperr.As(err)
		if e.Code == apperr.Internal {
			s.internal(w, r, err)
			return
		}
		s.showPayment(w, r, e.Code.HTTPStatus(), &flash{Text: "Retry refused: " + e.Detail})
		return
	}
	f := flash{OK: true, Text: fmt.Sprintf("Delivery %s is %s: it is tried again now.", d.ID, d.Status)}
	if replayed {
		f.Text = fmt.Sprintf("Delivery %s is %s. This form had been sent already: nothing was done again.", d.ID, d.Status)
	}
	s.showPayment(w, r, http.StatusOK, &f)
}
