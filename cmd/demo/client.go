package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/acme/paymentsvc/internal/childproc"
)

// payment is a POST /v1/payments body.
type payment struct {
	OrderID       string `json:"order_id"`
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	PaymentMethod string `json:"payment_method"`
}

func visa(order string, amount int64) payment {
	return payment{OrderID: order, Amount: amount, Currency: "USD", PaymentMethod: "pm_card_visa"}
}

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
}

// pay posts body with the idempotency key to p, giving up after timeout. A
// transport error (timeout, connection reset by a dying pod) is returned as is.
func (c *client) pay(ctx context.Context, p pod, key string, body payment, timeout time.Duration) (answer, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return answer{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL()+"/v1/payments", bytes.NewReader(raw))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := noKeepAlive.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	// A payment's "status" is a string, a problem's a number: decode by kind.
	a := answer{Pod: p.name, HTTPStatus: resp.StatusCode}
	if resp.StatusCode < 300 || resp.StatusCode == http.StatusPaymentRequired {
		var v struct {
			ID       string  `json:"id"`
			OrderID  string  `json:"order_id"`
			Status   string  `json:"status"`
			ChargeID *string `json:"provider_charge_id"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			return answer{}, fmt.Errorf("decode %d answer: %w", resp.StatusCode, err)
		}
		replayed := resp.Header.Get("Idempotent-Replayed") == "true"
		a.OrderID, a.Status, a.PaymentID, a.Replayed = v.OrderID, v.Status, v.ID, &replayed
		if v.ChargeID != nil {
			a.Charge = *v.ChargeID
		}
	} else {
		var v struct {
			Code string `json:"code"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			return answer{}, fmt.Errorf("decode %d answer: %w", resp.StatusCode, err)
		}
		a.Code = v.Code
	}
	a.RetryAfter, _ = strconv.Atoi(resp.Header.Get("Retry-After"))
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
	var out struct {
		Data []listedPayment `json:"data"`
	}
	err := getJSON(ctx, p.URL()+"/v1/payments?order_id="+url.QueryEscape(order), c.apiKey, &out)
	return out.Data, err
}

// noKeepAlive never reuses a connection, so that a killed pod leaves no
// stale connection behind for the next request.
var noKeepAlive = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}

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

func getJSON(ctx context.Context, u, apiKey string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	return doJSON(req, out)
}

func doJSON(req *http.Request, out any) error {
	resp, err := noKeepAlive.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, b)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// simulator is providersim's control API.
type simulator struct{ *childproc.Proc }

// simCharge is a charge as GET /_sim/charges lists it.
type simCharge struct {
	ID        string `json:"id"`
	Reference string `json:"reference"`
	Status    string `json:"status"`
}

func (s simulator) setFaults(ctx context.Context, latencyMS int) error {
	body, _ := json.Marshal(map[string]any{"latency_ms": latencyMS})
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.URL()+"/_sim/faults", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return doJSON(req, nil)
}

func (s simulator) clearFaults(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.URL()+"/_sim/faults", nil)
	if err != nil {
		return err
	}
	return doJSON(req, nil)
}

func (s simulator) charges(ctx context.Context) ([]simCharge, error) {
	var out struct {
		Data []simCharge `json:"data"`
	}
	err := getJSON(ctx, s.URL()+"/_sim/charges", "", &out)
	return out.Data, err
}

func (s simulator) chargeCalls(ctx context.Context) (int64, error) {
	var st struct {
		ChargeCalls int64 `json:"charge_calls"`
	}
	err := getJSON(ctx, s.URL()+"/_sim/stats", "", &st)
	return st.ChargeCalls, err
}
