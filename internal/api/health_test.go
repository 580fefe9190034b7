package api_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/api"
)

// While the process drains, /readyz answers 503 without asking the database
// (it may be closing), and /healthz still answers 200. The end-to-end
// shutdown test cannot see this reliably: the listener closes at once.
func TestReadyzWhileDraining(t *testing.T) {
	t.Parallel()
	draining := new(atomic.Bool)
	draining.Store(true)
	h := api.New(api.Deps{Draining: draining, Log: slog.New(slog.DiscardHandler)}) // no pool: readiness must not need it
	for path, want := range map[string]struct {
		code   int
		status string
	}{
		"/readyz":  {http.StatusServiceUnavailable, "draining"},
		"/healthz": {http.StatusOK, "ok"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var body struct{ Status string }
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), "%s: %s", path, rec.Body)
		require.Equal(t, want.code, rec.Code, path)
		require.Equal(t, want.status, body.Status, path)
		require.NotEmpty(t, rec.Header().Get("X-Request-Id"), path)
	}
}

// A 405 names the methods the path has (RFC 9110 requires Allow), and HEAD
// is answered wherever GET is.
func TestMethodNotAllowedSaysWhatIs(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(api.New(api.Deps{Draining: new(atomic.Bool), Log: slog.New(slog.DiscardHandler), Webhooks: http.NotFoundHandler()}))
	t.Cleanup(srv.Close)
	for _, c := range []struct{ method, path, allow string }{
		{http.MethodPost, "/healthz", "GET, HEAD"},
		{http.MethodDelete, "/v1/payments", "GET, HEAD, POST"},
		{http.MethodPatch, "/v1/payments/pay_x/refunds", "GET, HEAD, POST"},
		{http.MethodPost, "/v1/routing", "GET, HEAD, PUT"},
		{http.MethodGet, "/v1/webhooks/sim", "POST"},
	} {
		req, err := http.NewRequest(c.method, srv.URL+c.path, nil)
		require.NoError(t, err)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s %s", c.method, c.path)
		require.Equal(t, c.allow, resp.Header.Get("Allow"), "%s %s", c.method, c.path)
	}
	resp, err := srv.Client().Head(srv.URL + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "HEAD /healthz")
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
}
