// Package apiclient is the HTTP client of paymentsvc's API, and of the
// provider simulator's control API, as the demo (cmd/demo) and the tests
// call them. It returns errors and never fails a test itself, so that a
// binary can use it; internal/proctest adds the test-failing variants.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Timeout bounds every request of a client made by New.
const Timeout = 30 * time.Second

// Client calls paymentsvc's API, as a tenant when APIKey is set.
type Client struct {
	BaseURL string
	APIKey  string // sent as Authorization: Bearer APIKey, unless a request sets its own
	HTTP    *http.Client
}

// New returns a client of baseURL with the Timeout and no keep-alive, so
// that a killed pod never leaves a stale connection behind for the next
// request.
func New(baseURL, apiKey string) *Client {
	return &Client{BaseURL: baseURL, APIKey: apiKey, HTTP: NoKeepAlive()}
}

// NoKeepAlive returns an http.Client with the Timeout that opens a fresh
// connection for every request.
func NoKeepAlive() *http.Client {
	return &http.Client{Timeout: Timeout, Transport: &http.Transport{DisableKeepAlives: true}}
}

// Payment is a create body.
type Payment struct {
	OrderID       string `json:"order_id"`
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	PaymentMethod string `json:"payment_method"`
	CaptureMethod string `json:"capture_method,omitempty"` // "manual": only authorize
}

// Visa is a payment of amount for order that the simulator charges.
func Visa(order string, amount int64) Payment {
	return Payment{OrderID: order, Amount: amount, Currency: "USD", PaymentMethod: "pm_card_visa"}
}

// Pay posts body to /v1/payments with the Idempotency-Key key (none when
// key is ""). A string or []byte body is sent as is, anything else as JSON.
// A transport error (timeout, reset, killed pod) is returned as err.
func (c *Client) Pay(key string, body any) (Response, error) {
	return c.PayContext(context.Background(), key, body)
}

// PayContext is Pay with a context.
func (c *Client) PayContext(ctx context.Context, key string, body any) (Response, error) {
	var raw []byte
	switch b := body.(type) {
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return Response{}, err
		}
	}
	return c.DoContext(ctx, http.MethodPost, "/v1/payments", raw, map[string]string{
		"Idempotency-Key": key, "Content-Type": "application/json",
	})
}

// Get fetches path.
func (c *Client) Get(path string) (Response, error) {
	return c.GetContext(context.Background(), path)
}

// GetContext is Get with a context.
func (c *Client) GetContext(ctx context.Context, path string) (Response, error) {
	return c.DoContext(ctx, http.MethodGet, path, nil, nil)
}

// Do sends one request; headers with an empty value are not sent.
func (c *Client) Do(method, path string, body []byte, headers map[string]string) (Response, error) {
	return c.DoContext(context.Background(), method, path, body, headers)
}

// DoContext is Do with a context.
func (c *Client) DoContext(ctx context.Context, method, path string, body []byte, headers map[string]string) (Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		return Response{}, err
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	for k, v := range headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, err
	}
	r := Response{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &r.JSON) // not every answer is a JSON object
	}
	return r, nil
}

// Response is an answer read in full.
type Response struct {
	Status int
	Header http.Header
	Raw    []byte
	JSON   map[string]any // the body, when it is a JSON object
}

// Str returns a string field of the JSON body ("" if absent, null or not a
// string: a payment's "status" is a string, a problem's a number).
func (r Response) Str(field string) string {
	s, _ := r.JSON[field].(string)
	return s
}

// Replayed reports whether the answer carried Idempotent-Replayed: true.
func (r Response) Replayed() bool { return r.Header.Get("Idempotent-Replayed") == "true" }

// RetryAfter is the Retry-After header in seconds (0 when absent or not a number).
func (r Response) RetryAfter() int {
	n, _ := strconv.Atoi(r.Header.Get("Retry-After"))
	return n
}

// String describes r for failure messages.
func (r Response) String() string { return fmt.Sprintf("%d %s", r.Status, r.Raw) }
