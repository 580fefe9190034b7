package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/childproc"
	"github.com/acme/paymentsvc/internal/providersim"
)

// pod is one paymentsvc process as the checkout client sees it.
type pod struct {
	name string // "A" or "B"
	*childproc.Proc
}

// answer is one response of paymentsvc, reduced to what the demo prints.
type answer struct {
	Pod        string `json:"pod"`
	OrderID    string `json:"order_id,omitempty"`
	Status     string `json:"status,omitempty"`
	Provider   string `json:"provider,omitempty"`
	Charge     string `json:"charge,omitempty"`
	Replayed   *bool  `json:"replayed,omitempty"`
	Code       string `json:"code,omitempty"`
	RetryAfter int    `json:"retry_after,omitempty"`
	PaymentID  string `json:"-"`
	HTTPStatus int    `json:"-"`
}

// String prints the answer as the demo narrates it: `201 {"pod":"A",…}`.
func (a answer) String() string {
	b, _ := json.Marshal(a)
	return fmt.Sprintf("%d %s", a.HTTPStatus, b)
}

func (a answer) statusAndRetryAfter() (int, int) { return a.HTTPStatus, a.RetryAfter }

// client is the checkout service calling paymentsvc as one tenant.
type client struct {
	apiKey string
	http   *http.Client // shared by the pods' clients; no keep-alive
}

func newClient(apiKey string) *client {
	return &client{apiKey: apiKey, http: apiclient.NoKeepAlive()}
}

// of is the tenant's API client of pod p (at its current address: a
// restarted pod listens on a new port).
func (c *client) of(p pod) *apiclient.Client {
	return &apiclient.Client{BaseURL: p.URL(), APIKey: c.apiKey, HTTP: c.http}
}

// pay posts body with the idempotency key to p, giving up after timeout. A
// transport error (timeout, connection reset by a dying pod) is returned as is.
func (c *client) pay(ctx context.Context, p pod, key string, body apiclient.Payment, timeout time.Duration) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r, err := c.of(p).PayContext(ctx, key, body)
	if err != nil {
		return answer{}, err
	}
	a := answer{Pod: p.name, HTTPStatus: r.Status, RetryAfter: r.RetryAfter()}
	if r.JSON == nil {
		return answer{}, fmt.Errorf("%d answer is not a JSON object: %s", r.Status, r.Raw)
	}
	if r.Status < 300 || r.Status == http.StatusPaymentRequired {
		replayed := r.Replayed()
		a.OrderID, a.Status, a.PaymentID, a.Charge, a.Replayed = r.Str("order_id"), r.Str("status"), r.Str("id"), r.Str("provider_charge_id"), &replayed
		a.Provider = r.Str("provider")
	} else {
		a.Code = r.Str("code")
	}
	return a, nil
}

// listedPayment is a payment as GET /v1/payments lists it.
type listedPayment struct {
	ID       string  `json:"id"`
	OrderID  string  `json:"order_id"`
	Status   string  `json:"status"`
	Provider *string `json:"provider"`
	ChargeID *string `json:"provider_charge_id"`
}

// paymentsOf lists order's payments through p.
func (c *client) paymentsOf(ctx context.Context, p pod, order string) ([]listedPayment, error) {
	r, err := c.of(p).GetContext(ctx, "/v1/payments?order_id="+url.QueryEscape(order))
	if err != nil {
		return nil, err
	}
	if r.Status != http.StatusOK {
		return nil, fmt.Errorf("list payments of %s: %s", order, r)
	}
	var out struct {
		Data []listedPayment `json:"data"`
	}
	err = json.Unmarshal(r.Raw, &out)
	return out.Data, err
}

// allPayments lists every payment of the tenant through p (the demo makes
// fewer than a page of 100), oldest first.
func (c *client) allPayments(ctx context.Context, p pod) ([]listedPayment, error) {
	r, err := c.of(p).GetContext(ctx, "/v1/payments?limit=100")
	if err != nil {
		return nil, err
	}
	if r.Status != http.StatusOK {
		return nil, fmt.Errorf("list payments: %s", r)
	}
	var out struct {
		Data    []listedPayment `json:"data"`
		HasMore bool            `json:"has_more"`
	}
	if err := json.Unmarshal(r.Raw, &out); err != nil {
		return nil, err
	}
	if out.HasMore {
		return nil, errors.New("list payments: more than 100")
	}
	slices.Reverse(out.Data)
	return out.Data, nil
}

// opAnswer is one answer to an operation on a payment (a refund, a
// capture), reduced to what the demo prints.
type opAnswer struct {
	Pod            string `json:"pod"`
	RefundID       string `json:"refund_id,omitempty"`
	CaptureID      string `json:"capture_id,omitempty"`
	Status         string `json:"status,omitempty"`
	Amount         int64  `json:"amount,omitempty"`
	ProviderRefund string `json:"provider_refund_id,omitempty"`
	Replayed       *bool  `json:"replayed,omitempty"`
	Code           string `json:"code,omitempty"`
	RetryAfter     int    `json:"retry_after,omitempty"`
	HTTPStatus     int    `json:"-"`
}

func (a opAnswer) String() string {
	b, _ := json.Marshal(a)
	return fmt.Sprintf("%d %s", a.HTTPStatus, b)
}

func (a opAnswer) statusAndRetryAfter() (int, int) { return a.HTTPStatus, a.RetryAfter }

// id is the refund's or capture's id.
func (a opAnswer) id() string { return a.RefundID + a.CaptureID }

// refund posts a refund of amount of payment paymentID to p with the
// idempotency key.
func (c *client) refund(ctx context.Context, p pod, paymentID, key string, amount int64) (opAnswer, error) {
	return c.operate(ctx, p, paymentID, "refunds", key, fmt.Sprintf(`{"amount":%d,"reason":"requested_by_customer"}`, amount))
}

// capture posts a capture of amount of payment paymentID to p with the
// idempotency key.
func (c *client) capture(ctx context.Context, p pod, paymentID, key string, amount int64) (opAnswer, error) {
	return c.operate(ctx, p, paymentID, "captures", key, fmt.Sprintf(`{"amount":%d}`, amount))
}

// operate posts body to p as an operation (what: refunds, captures) on
// payment paymentID with the idempotency key.
func (c *client) operate(ctx context.Context, p pod, paymentID, what, key, body string) (opAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, patient)
	defer cancel()
	r, err := c.of(p).DoContext(ctx, http.MethodPost, "/v1/payments/"+url.PathEscape(paymentID)+"/"+what, []byte(body),
		map[string]string{"Idempotency-Key": key, "Content-Type": "application/json"})
	if err != nil {
		return opAnswer{}, err
	}
	if r.JSON == nil {
		return opAnswer{}, fmt.Errorf("%d answer is not a JSON object: %s", r.Status, r.Raw)
	}
	a := opAnswer{Pod: p.name, HTTPStatus: r.Status, RetryAfter: r.RetryAfter()}
	if r.Status >= 300 && r.Status != http.StatusPaymentRequired {
		a.Code = r.Str("code")
		return a, nil
	}
	replayed := r.Replayed()
	amount, _ := r.JSON["amount"].(float64)
	a.Status, a.Amount, a.ProviderRefund, a.Replayed = r.Str("status"), int64(amount), r.Str("provider_refund_id"), &replayed
	if what == "captures" {
		a.CaptureID = r.Str("id")
	} else {
		a.RefundID = r.Str("id")
	}
	return a, nil
}

// get reads path through p and decodes the JSON object it answers.
func (c *client) get(ctx context.Context, p pod, path string) (apiclient.Response, error) {
	r, err := c.of(p).GetContext(ctx, path)
	if err != nil {
		return r, err
	}
	if r.Status != http.StatusOK || r.JSON == nil {
		return r, fmt.Errorf("GET %s: %s", path, r)
	}
	return r, nil
}

// putRouting replaces the tenant's routing rules through p and returns the
// answer's body.
func (c *client) putRouting(ctx context.Context, p pod, rules string) (string, error) {
	r, err := c.of(p).DoContext(ctx, http.MethodPut, "/v1/routing", []byte(rules), map[string]string{"Content-Type": "application/json"})
	if err != nil {
		return "", err
	}
	if r.Status != http.StatusOK {
		return "", fmt.Errorf("PUT /v1/routing: %s", r)
	}
	return strings.TrimSpace(string(r.Raw)), nil
}

// shortError is the innermost cause of a transport error ("EOF",
// "connection reset by peer"), as a client's log would show it.
func shortError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return "TIMEOUT"
		}
		err = ue.Err
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return "ERROR " + err.Error()
		}
		err = next
	}
}

// simulator is providersim's process and its control API.
type simulator struct{ *childproc.Proc }

func (s simulator) control() apiclient.Sim { return apiclient.Sim{URL: s.URL()} }

func (s simulator) setFaults(ctx context.Context, latencyMS int) error {
	return s.control().SetFaults(ctx, providersim.Faults{LatencyMS: latencyMS})
}

func (s simulator) setFaultSet(ctx context.Context, f providersim.Faults) error {
	return s.control().SetFaults(ctx, f)
}

func (s simulator) stats(ctx context.Context) (providersim.Stats, error) {
	return s.control().Stats(ctx)
}

func (s simulator) clearFaults(ctx context.Context) error { return s.control().ClearFaults(ctx) }

func (s simulator) charges(ctx context.Context) ([]providersim.Charge, error) {
	return s.control().Charges(ctx)
}

func (s simulator) chargeCalls(ctx context.Context) (int64, error) {
	st, err := s.control().Stats(ctx)
	return st.ChargeCalls, err
}
