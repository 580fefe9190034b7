package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
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
	Charge     string `json:"charge,omitempty"`
	Replayed   *bool  `json:"replayed,omitempty"`
	Code       string `json:"code,omitempty"`
	RetryAfter int    `json:"retry_after,omitempty"`
	PaymentID  string `json:"-"`
	HTTPStatus int    `json:"-"`
}

// String prints the answer like the seed's account: `201 {"pod":"A",…}`.
func (a answer) String() string {
	b, _ := json.Marshal(a)
	return fmt.Sprintf("%d %s", a.HTTPStatus, b)
}

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
	} else {
		a.Code = r.Str("code")
	}
	return a, nil
}

// listedPayment is a payment as GET /v1/payments?order_id= lists it.
type listedPayment struct {
	ID       string  `json:"id"`
	Status   string  `json:"status"`
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

func (s simulator) clearFaults(ctx context.Context) error { return s.control().ClearFaults(ctx) }

func (s simulator) charges(ctx context.Context) ([]providersim.Charge, error) {
	return s.control().Charges(ctx)
}

func (s simulator) chargeCalls(ctx context.Context) (int64, error) {
	st, err := s.control().Stats(ctx)
	return st.ChargeCalls, err
}
