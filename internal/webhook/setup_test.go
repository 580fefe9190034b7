package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/testdb"
)

// testSecret signs the deliveries of every test unless it says otherwise.
const testSecret = "whsec_test_primary"

// testNow is the handler's clock in every test, so timestamps are exact.
var testNow = time.Unix(1_760_000_000, 0)

// bundle is one test's database and a real HTTP server in front of a Handler.
type bundle struct {
	t        *testing.T
	pool     *db.Pool
	url      string
	client   *http.Client
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
	b := &bundle{t: t, pool: tdb.Pool, url: srv.URL + "/v1/webhooks/sim", client: srv.Client()}
	b.tenantID = "ten_" + randomHex(6)
	_, err := db.Q.TenantInsert(context.Background(), tdb.Pool, db.TenantInsertParams{
		ID: b.tenantID, Name: "webhook tests", ApiKeySha256: []byte(randomHex(16)),
	})
	noErr(t, err, "insert tenant")
	return b
}

// paths lead from CREATED to each status a fixture may start in.
var paths = map[attempts.Status][]attempts.Status{
	attempts.Created:   nil,
	attempts.Pending:   {attempts.Pending},
	attempts.Unknown:   {attempts.Pending, attempts.Unknown},
	attempts.Succeeded: {attempts.Pending, attempts.Succeeded},
	attempts.Failed:    {attempts.Pending, attempts.Failed},
}

// attempt creates an attempt and moves it, as the API would, to status. A
// SUCCEEDED or FAILED attempt records a charge id; the charge id the
// provider made (or would make) for the attempt is returned either way.
func (b *bundle) attempt(status attempts.Status) (attempts.Attempt, string) {
	b.t.Helper()
	chargeID := "ch_" + randomHex(8)
	var a attempts.Attempt
	err := db.WithTx(context.Background(), b.pool, func(tx pgx.Tx) error {
		var err error
		id := attempts.NewID()
		a, err = attempts.Insert(context.Background(), tx, attempts.New{
			ID: id, TenantID: b.tenantID, OrderID: "o-" + randomHex(6), IdempotencyKey: "k-" + randomHex(6),
			Amount: 500, Currency: "USD", PaymentMethod: "pm_card_visa",
		})
		if err != nil {
			return err
		}
		for _, to := range paths[status] {
			c := attempts.Change{ID: id, To: to, Source: attempts.SourceAPI, Reason: "fixture"}
			if to.Final() {
				c.ChargeID = chargeID
			}
			if to == attempts.Failed {
				c.FailureCode = "card_declined"
			}
			var applied bool
			a, applied, err = attempts.Transition(context.Background(), tx, c)
			if err != nil {
				return err
			}
			if !applied {
				return fmt.Errorf("fixture transition to %s not applied", to)
			}
		}
		return nil
	})
	noErr(b.t, err, "create attempt")
	return a, chargeID
}

// simCharge and simEvent mirror the simulator's webhook body.
type simCharge struct {
	ID             string `json:"id"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Status         string `json:"status"`
	Reference      string `json:"reference"`
	IdempotencyKey string `json:"idempotency_key"`
	PaymentMethod  string `json:"payment_method"`
	Created        int64  `json:"created"`
	Refunded       bool   `json:"refunded"`
	FailureCode    string `json:"failure_code,omitempty"`
}

type simEvent struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    struct {
		Charge simCharge `json:"charge"`
	} `json:"data"`
}

// newEvent builds the simulator's event of type typ about chargeID for a.
func newEvent(typ string, a attempts.Attempt, chargeID string) simEvent {
	ev := simEvent{ID: "evt_" + randomHex(8), Type: typ, Created: testNow.Unix()}
	ev.Data.Charge = simCharge{
		ID: chargeID, Amount: a.Amount, Currency: a.Currency, Status: "succeeded",
		Reference: a.ID, IdempotencyKey: attempts.ProviderKey(a.ID), PaymentMethod: a.PaymentMethod,
		Created: testNow.Unix(),
	}
	switch typ {
	case EventChargeFailed:
		ev.Data.Charge.Status = "failed"
		ev.Data.Charge.FailureCode = "card_declined"
	case EventChargeRefunded:
		ev.Data.Charge.Refunded = true
	}
	return ev
}

func (ev simEvent) body(t *testing.T) []byte {
	t.Helper()
	raw, err := json.Marshal(ev)
	noErr(t, err, "encode event")
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

// reply is a response read in full.
type reply struct {
	status      int
	contentType string
	body        []byte
}

// post delivers body with the Sim-Signature header sig (none when empty).
func (b *bundle) post(body []byte, sig string) reply {
	b.t.Helper()
	r, err := b.tryPost(body, sig)
	noErr(b.t, err, "POST webhook")
	return r
}

// tryPost is post for goroutines, which must not call t.Fatal.
func (b *bundle) tryPost(body []byte, sig string) (reply, error) {
	req, err := http.NewRequest(http.MethodPost, b.url, bytes.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if sig != "" {
		req.Header.Set(HeaderSignature, sig)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: raw}, err
}

// deliver posts ev signed with testSecret now, as the simulator would.
func (b *bundle) deliver(ev simEvent) reply {
	b.t.Helper()
	body := ev.body(b.t)
	return b.post(body, sign(testSecret, testNow.Unix(), body))
}

// count runs a SELECT count(*) query.
func (b *bundle) count(query string, args ...any) int {
	b.t.Helper()
	var n int
	err := b.pool.QueryRow(context.Background(), query, args...).Scan(&n)
	noErr(b.t, err, query)
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
	noErr(b.t, err, "read outcome of "+eventID)
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
	noErr(b.t, err, "get attempt")
	return a
}

// expectOK checks a 200 {"received":true}.
func expectOK(t *testing.T, r reply) {
	t.Helper()
	eq(t, r.status, http.StatusOK, "status (body %s)", r.body)
	eq(t, r.contentType, "application/json", "content type")
	var got map[string]any
	noErr(t, json.Unmarshal(r.body, &got), "decode body")
	eq(t, len(got), 1, "fields in %s", r.body)
	eq(t, got["received"], any(true), "received")
}

// expectProblem checks a problem document with status and code.
func expectProblem(t *testing.T, r reply, status int, code string) {
	t.Helper()
	eq(t, r.status, status, "status (body %s)", r.body)
	eq(t, r.contentType, "application/problem+json", "content type")
	var p apperr.Problem
	noErr(t, json.Unmarshal(r.body, &p), "decode problem")
	eq(t, p, apperr.Problem{Type: "https://paymentsvc.example/problems/" + code, Title: http.StatusText(status), Status: status, Detail: p.Detail, Code: code}, "problem")
	if p.Detail == "" {
		t.Errorf("problem has no detail")
	}
}

func noErr(t testing.TB, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func eq[T comparable](t testing.TB, got, want T, format string, args ...any) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", fmt.Sprintf(format, args...), got, want)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
