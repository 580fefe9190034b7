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
