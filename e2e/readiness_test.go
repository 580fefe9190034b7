package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// setDatabaseConnections opens or closes the pod's database to connections
// through the admin server. Closing it also ends the sessions it has, so the
// pod's pool loses every connection and cannot make new ones: from the
// pod's side, the database is gone; the database itself is intact.
func setDatabaseConnections(t *testing.T, name string, allow bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, testdb.AdminURL())
	require.NoError(t, err)
	defer admin.Close(ctx)
	db := pgx.Identifier{name}.Sanitize()
	if allow {
		_, err = admin.Exec(ctx, "ALTER DATABASE "+db+" ALLOW_CONNECTIONS true")
		require.NoError(t, err)
		return
	}
	_, err = admin.Exec(ctx, "ALTER DATABASE "+db+" ALLOW_CONNECTIONS false")
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name)
	require.NoError(t, err)
}

// /readyz follows the database: 200, then 503 while the pod cannot reach
// its database, then 200 again once it can; /healthz stays 200 throughout
// (a database outage must not get pods restarted), /metrics keeps answering,
// and API requests answer 503 database_unavailable without leaking internals.
func TestReadinessFollowsTheDatabase(t *testing.T) {
	t.Parallel()
	v := newSpecValidator(t, nil)
	s := setupOps(t, opsOptions{transport: v.wrap})
	status := func(path string) (int, string) {
		r := s.anon.MustGet(t, path)
		return r.Status, r.Str("status")
	}
	code, st := status("/readyz")
	require.Equal(t, 200, code)
	require.Equal(t, "ready", st)

	// Restored even if the test fails, before testdb drops the database.
	t.Cleanup(func() { setDatabaseConnections(t, s.db.Name, true) })
	setDatabaseConnections(t, s.db.Name, false)

	testkit.Eventually(t, time.Minute, "/readyz answers 503 while the database is unreachable", func() bool {
		code, st = status("/readyz")
		return code == http.StatusServiceUnavailable
	})
	require.Equal(t, "database unreachable", st)
	code, _ = status("/healthz")
	require.Equal(t, 200, code, "liveness does not depend on the database")

	m := s.scrape(t)
	require.Equal(t, 0.0, m.value("paymentsvc_attempts_backlog_up", nil), "the backlog query fails, the scrape does not")
	_, hasGauge := m["paymentsvc_attempts_unresolved"]
	require.False(t, hasGauge, "no stale backlog numbers while the database is unreachable")

	r := s.client.MustPay(t, "ready-1", apiclient.Visa("o-ready", 500))
	requireDatabaseUnavailable(t, r, "POST /v1/payments")
	require.False(t, strings.Contains(string(r.Raw), s.db.Name), "no database detail in the answer")

	setDatabaseConnections(t, s.db.Name, true)
	testkit.Eventually(t, time.Minute, "/readyz answers 200 once the database is back", func() bool {
		code, _ = status("/readyz")
		return code == http.StatusOK
	})
	r = s.client.MustPay(t, "ready-1", apiclient.Visa("o-ready", 500))
	require.Equal(t, 201, r.Status, "the key was not stored by the failed attempt: %s", r)
	require.Equal(t, 1.0, s.scrape(t).value("paymentsvc_attempts_backlog_up", nil))
}
