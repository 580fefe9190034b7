package proctest

import (
	"net/http"
	"testing"

	"github.com/acme/paymentsvc/internal/apiclient"
)

// Client is an apiclient.Client whose Must methods fail the test on a
// transport error instead of returning it. Use the plain methods in
// goroutines: a test may only be failed from its own goroutine.
type Client struct {
	*apiclient.Client
}

// NewClient returns a client of baseURL as the tenant with apiKey ("" for
// none), as apiclient.New makes it.
func NewClient(baseURL, apiKey string) *Client {
	return &Client{apiclient.New(baseURL, apiKey)}
}

// MustPay is Pay that fails t on a transport error.
func (c *Client) MustPay(t testing.TB, key string, body any) apiclient.Response {
	t.Helper()
	r, err := c.Pay(key, body)
	if err != nil {
		t.Fatalf("POST /v1/payments key %q: %v", key, err)
	}
	return r
}

// MustGet is Get that fails t on a transport error.
func (c *Client) MustGet(t testing.TB, path string) apiclient.Response {
	t.Helper()
	return c.MustDo(t, http.MethodGet, path, nil, nil)
}

// MustDo is Do that fails t on a transport error.
func (c *Client) MustDo(t testing.TB, method, path string, body []byte, headers map[string]string) apiclient.Response {
	t.Helper()
	r, err := c.Do(method, path, body, headers)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}
