package proctest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// Client calls paymentsvc's API as a tenant.
type Client struct {
	BaseURL string
	APIKey  string
	HTTP    *http.Client
}

// NewClient returns a client of baseURL with a 30s timeout and no
// keep-alive, so that a killed pod never leaves a stale connection behind.
func NewClient(baseURL, apiKey string) *Client {
	return &Client{BaseURL: baseURL, APIKey: apiKey, HTTP: &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true},
	}}
}

// Response is a decoded answer.
type Response struct {
	Status int
	Header http.Header
	Raw    []byte
	JSON   map[string]any
}

// Str returns a string field of the JSON body ("" if absent or null).
func (r Response) Str(field string) string {
	s, _ := r.JSON[field].(string)
	return s
}

// Replayed reports whether the answer carried Idempotent-Replayed: true.
func (r Response) Replayed() bool { return r.Header.Get("Idempotent-Replayed") == "true" }

// Payment is a create body.
type Payment struct {
	OrderID       string `json:"order_id"`
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	PaymentMethod string `json:"payment_method"`
}

// Visa is a payment of amount for order that the simulator charges.
func Visa(order string, amount int64) Payment {
	return Payment{OrderID: order, Amount: amount, Currency: "USD", PaymentMethod: "pm_card_visa"}
}

// Pay posts body to /v1/payments with the idempotency key; a transport error
// (timeout, reset, killed pod) is returned as err.
func (c *Client) Pay(key string, body any) (Response, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return Response{}, err
	}
	return c.Do(http.MethodPost, "/v1/payments", raw, map[string]string{
		"Idempotency-Key": key, "Content-Type": "application/json",
	})
}

// Get fetches path.
func (c *Client) Get(path string) (Response, error) {
	return c.Do(http.MethodGet, path, nil, nil)
}

// Do sends one request with the tenant's API key.
func (c *Client) Do(method, path string, body []byte, headers map[string]string) (Response, error) {
	req, err := http.NewRequest(method, c.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		return Response{}, err
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
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
		_ = json.Unmarshal(raw, &r.JSON)
	}
	return r, nil
}

// MustPay is Pay that fails t on a transport error.
func (c *Client) MustPay(t testing.TB, key string, body any) Response {
	t.Helper()
	r, err := c.Pay(key, body)
	if err != nil {
		t.Fatalf("POST /v1/payments key %s: %v", key, err)
	}
	return r
}

// String describes r for failure messages.
func (r Response) String() string { return fmt.Sprintf("%d %s", r.Status, r.Raw) }
