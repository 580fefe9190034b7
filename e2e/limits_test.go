package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Metric labels take values from fixed sets whatever clients send:
// hundreds of requests with made-up methods and paths, sent before any
// authentication, add no series beyond method "other" and route
// "unmatched".
func TestHTTPMetricLabelsStayBounded(t *testing.T) {
	t.Parallel()
	s := setupOps(t, opsOptions{})
	standard := map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true,
		"DELETE": true, "OPTIONS": true, "CONNECT": true, "TRACE": true, "other": true}
	routes := map[string]bool{"unmatched": true, "/healthz": true, "/readyz": true, "/metrics": true,
		"/openapi.yaml": true, "/v1/webhooks/{provider}": true, "/v1/payments": true, "/v1/payments/{id}": true}

	const n = 300
	client := &http.Client{Timeout: 30 * time.Second}
	madeUp := 0
	for i := range n {
		method, path := "GET", fmt.Sprintf("/made-up/%d", i)
		switch i % 3 {
		case 0:
			method = fmt.Sprintf("X-METHOD-%d", i)
			madeUp++
		case 1:
			method, path = fmt.Sprintf("Q%d", i), "/v1/payments"
			madeUp++
		}
		req, err := http.NewRequest(method, s.pod.URL()+path, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err, "%s %s", method, path)
		resp.Body.Close()
		require.GreaterOrEqual(t, resp.StatusCode, 400, "%s %s", method, path)
	}

	m := s.scrape(t)
	series := 0
	other := 0.0
	for _, name := range []string{"paymentsvc_http_requests_total", "paymentsvc_http_request_duration_seconds"} {
		fam, ok := m[name]
		require.True(t, ok, name)
		for _, metric := range fam.GetMetric() {
			series++
			var method, route string
			for _, lp := range metric.GetLabel() {
				switch lp.GetName() {
				case "method":
					method = lp.GetValue()
				case "route":
					route = lp.GetValue()
				}
			}
			require.True(t, standard[method], "%s: method label %q is not from the fixed set", name, method)
			require.True(t, routes[route], "%s: route label %q is not a pattern of the router", name, route)
			if name == "paymentsvc_http_requests_total" && method == "other" {
				other += metric.GetCounter().GetValue()
			}
		}
	}
	require.Equal(t, float64(madeUp), other, "every made-up method is counted as other")
	require.LessOrEqual(t, series, 20, "%d requests with %d made-up methods and %d paths", n, madeUp, n)
}

// Request headers over 64 KiB answer 431; a large header
// within the limit is served.
func TestOversizedRequestHeadersAnswer431(t *testing.T) {
	t.Parallel()
	s := setupOps(t, opsOptions{})

	r := opsOK(t)(s.anon.Do(http.MethodGet, "/healthz", nil, map[string]string{"X-Padding": strings.Repeat("a", 48<<10)}))
	require.Equal(t, http.StatusOK, r.Status, "48 KiB of headers are within the limit")

	// A raw connection, so that the test reads exactly what the server
	// answers to headers of 100 KiB (no client-side limit interferes).
	conn, err := net.DialTimeout("tcp", s.pod.Addr(), 10*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: pod\r\nX-Padding: %s\r\n\r\n", strings.Repeat("a", 100<<10))
	require.NoError(t, err)
	status, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "HTTP/1.1 431 Request Header Fields Too Large\r\n", status)
}
