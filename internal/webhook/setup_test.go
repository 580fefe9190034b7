package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// testSecret signs the deliveries of every test unless it says otherwise.
const testSecret = "whsec_test_primary"

// testNow is the handler's clock in every test, so timestamps are exact.
var testNow = time.Unix(1_760_000_000, 0)

// bundle is one test's database and a real HTTP server in front of a Handler.
type bundle struct {
	t        *testing.T
	pool     *db.Pool
	url      string           // of the webhook endpoint
	client   *proctest.Client // of the server, as the provider calls it
	tenantID string
}

// setup starts a Handler accepting secrets (testSecret when none are given)
// on a fresh database with one tenant.
func setup(t *testing.T, secrets ...string) *bundle {
	t.Helper()
	if len(secrets) == 0 {
		secrets = []string{testSecret}
	}
	tdb := testdb.New(t)
	h := NewHandler(tdb.Pool, "sim", secrets, slog.New(slog.DiscardHandler))
	h.Now = func() time.Time { return testNow }
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &bundle{
		t: t, pool: tdb.Pool, url: srv.URL + hookPath, client: proctest.NewClient(srv.URL, ""),
		tenantID: testdb.Tenant(t, tdb.Pool, testdb.TenantOpts{Name: "webhook tests"}).ID,
	}
}

// with is b for the subtest t: the helpers fail the test they are called
// for, from its own goroutine.
func (b *bundle) with(t *testing.T) *bundle {
	c := *b
	c.t = t
	return &c
}

// hookPath is where the provider delivers.
const hookPath = "/v1/webhooks/sim"

// attempt seeds an attempt in status, moved there as the API would. A
// SUCCEEDED or FAILED attempt records a charge id; the charge id the
// provider made (or would make) for the attempt is returned either way.
func (b *bundle) attempt(status attempts.Status) (attempts.Attempt, string) {
	b.t.Helper()
	chargeID := testkit.RandomID("ch_")
	return testdb.Attempt(b.t, b.pool, testdb.AttemptOpts{TenantID: b.tenantID, Status: status, ChargeID: chargeID}).Attempt, chargeID
}

// newEvent builds the simulator's event of type typ about chargeID for a.
func newEvent(typ string, a attempts.Attempt, chargeID string) providersim.Event {
	ev := providersim.Event{ID: testkit.RandomID("evt_"), Type: typ, Created: testNow.Unix()}
	ev.Data.Charge = providersim.Charge{
		ID: chargeID, Amount: a.Amount, Currency: a.Currency, Status: providersim.StatusSucceeded,
		Reference: a.ID, IdempotencyKey: attempts.ProviderKey(a.ID), PaymentMethod: a.PaymentMethod,
		Created: testNow.Unix(),
	}
	switch typ {
	case EventChargeFailed:
		ev.Data.Charge.Status = providersim.StatusFailed
		ev.Data.Charge.FailureCode = "card_declined"
	case EventChargeRefunded:
		ev.Data.Charge.Refunded = true
	}
	return ev
}

// encode is the body the simulator sends for ev.
func encode(t *testing.T, ev providersim.Event) []byte {
	t.Helper()
	raw, err := json.Marshal(ev)
	require.NoError(t, err, "encode event")
	return raw
}

// sign is the Sim-Signature header for body under secret at ts, computed
// here rather than by the simulator so the test states the scheme itself.
func sign(secret string, ts int64, body []byte) string {
	return "t=" + strconv.FormatInt(ts, 10) + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret string, ts int64, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts, 10) + "." + string(body)))
	return m.Sum(nil)
}

// post delivers body with the Sim-Signature header sig (none when empty).
func (b *bundle) post(body []byte, sig string) apiclient.Response {
	b.t.Helper()
	r, err := b.tryPost(body, sig)
	require.NoError(b.t, err, "POST webhook")
	return r
}

// tryPost is post for goroutines, which must not fail the test.
func (b *bundle) tryPost(body []byte, sig string) (apiclient.Response, error) {
	return b.client.Do(http.MethodPost, hookPath, body, map[string]string{"Content-Type": "application/json", HeaderSignature: sig})
}

// deliver posts ev signed with testSecret now, as the simulator would.
func (b *bundle) deliver(ev providersim.Event) apiclient.Response {
	b.t.Helper()
	body := encode(b.t, ev)
	return b.post(body, sign(testSecret, testNow.Unix(), body))
}

// count runs a SELECT count(*) query.
func (b *bundle) count(query string, args ...any) int {
	b.t.Helper()
	var n int
	require.NoError(b.t, b.pool.QueryRow(context.Background(), query, args...).Scan(&n), query)
	return n
}

func (b *bundle) webhookEvents(eventID string) int {
	return b.count(`SELECT count(*) FROM webhook_events WHERE event_id = $1`, eventID)
}

func (b *bundle) outcome(eventID string) string {
	b.t.Helper()
	var o string
	err := b.pool.QueryRow(context.Background(),
		`SELECT outcome FROM webhook_events WHERE provider = 'sim' AND event_id = $1`, eventID).Scan(&o)
	require.NoError(b.t, err, "read outcome of %s", eventID)
	return o
}

func (b *bundle) audits(attemptID string, to attempts.Status) int {
	return b.count(`SELECT count(*) FROM payment_attempt_events WHERE attempt_id = $1 AND to_status = $2`, attemptID, string(to))
}

func (b *bundle) allAudits(attemptID string) int {
	return b.count(`SELECT count(*) FROM payment_attempt_events WHERE attempt_id = $1`, attemptID)
}

func (b *bundle) outbox(attemptID string) int {
	return b.count(`SELECT count(*) FROM outbox WHERE payment_id = $1`, attemptID)
}

func (b *bundle) anomalies(kind, chargeID string) int {
	return b.count(`SELECT count(*) FROM anomalies WHERE kind = $1 AND charge_id = $2`, kind, chargeID)
}

func (b *bundle) allAnomalies() int { return b.count(`SELECT count(*) FROM anomalies`) }

func (b *bundle) get(id string) attempts.Attempt {
	b.t.Helper()
	a, err := attempts.Get(context.Background(), b.pool, id)
	require.NoError(b.t, err, "get attempt")
	return a
}

// expectOK checks a 200 {"received":true}.
func expectOK(t *testing.T, r apiclient.Response) {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	require.JSONEq(t, `{"received":true}`, string(r.Raw))
}
