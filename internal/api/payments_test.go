package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/testdb"
)

func TestUnauthorizedWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	auths := map[string]string{
		"missing":           "",
		"not bearer":        "Basic " + b.a.APIKey,
		"bearer only":       "Bearer",
		"bearer blank":      "Bearer    ",
		"no scheme":         b.a.APIKey,
		"unknown key":       "Bearer sk_not_a_real_key",
		"key with trailing": "Bearer " + b.a.APIKey + "x",
	}
	for name, auth := range auths {
		headers := map[string]string{"Authorization": auth, "Idempotency-Key": "k-" + name, "Content-Type": "application/json"}
		r := b.do(http.MethodPost, "/v1/payments", []byte(visa("o-1", 500)), headers)
		require.NoError(t, r.CheckProblem(http.StatusUnauthorized, "unauthorized"))

		r = b.do(http.MethodGet, "/v1/payments/pay_x", nil, map[string]string{"Authorization": auth})
		require.NoError(t, r.CheckProblem(http.StatusUnauthorized, "unauthorized"))
		r = b.do(http.MethodGet, "/v1/payments?order_id=o-1", nil, map[string]string{"Authorization": auth})
		require.NoError(t, r.CheckProblem(http.StatusUnauthorized, "unauthorized"))
	}
	b.requireNothingWritten()
}

func TestUnsupportedMediaType(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "application/jsonx", "not a media type"} {
		r := b.do(http.MethodPost, "/v1/payments", []byte(visa("o-1", 500)), map[string]string{
			"Authorization": "Bearer " + b.a.APIKey, "Idempotency-Key": "k-1", "Content-Type": ct,
		})
		require.NoError(t, r.CheckProblem(http.StatusUnsupportedMediaType, "unsupported_media_type"))
	}
	b.requireNothingWritten()
	// A charset parameter is fine.
	r := b.do(http.MethodPost, "/v1/payments", []byte(visa("o-1", 500)), map[string]string{
		"Authorization": "Bearer " + b.a.APIKey, "Idempotency-Key": "k-1", "Content-Type": "application/json; charset=utf-8",
	})
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r)
}

func TestPayloadTooLarge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := validFields()
	f["description"] = strings.Repeat("x", 64<<10)
	r := b.pay(b.a, "k-1", body(f))
	require.NoError(t, r.CheckProblem(http.StatusRequestEntityTooLarge, "payload_too_large"))
	b.requireNothingWritten()

	// Just under the limit is read (and then refused for its content, not its size).
	raw := body(validFields())
	pad := (64 << 10) - len(raw)
	almost := raw[:len(raw)-1] + strings.Repeat(" ", pad) + "}"
	require.Len(t, almost, 64<<10)
	r = b.pay(b.a, "k-1", almost)
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r)
}

func TestIdempotencyKeyMissingOrInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.pay(b.a, "", visa("o-1", 500))
	require.NoError(t, r.CheckProblem(http.StatusBadRequest, "idempotency_key_missing"))
	for _, key := range []string{strings.Repeat("k", 256), "a b", "ключ", `"unterminated`, `"bad\escape"`} {
		r := b.pay(b.a, key, visa("o-1", 500))
		require.NoError(t, r.CheckProblem(http.StatusBadRequest, "idempotency_key_invalid"))
	}
	// Two keys in one request: which one the client meant is anybody's guess.
	for _, keys := range [][]string{{"k-1", "k-2"}, {"k-1", "k-1"}} {
		req, err := http.NewRequest(http.MethodPost, b.url+"/v1/payments", strings.NewReader(visa("o-1", 500)))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+b.a.APIKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header["Idempotency-Key"] = keys
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		r := apiclient.Response{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
		require.NoError(t, r.CheckProblem(http.StatusBadRequest, "idempotency_key_invalid"), "keys %v", keys)
	}
	b.requireNothingWritten()
	r = b.pay(b.a, strings.Repeat("k", 255), visa("o-1", 500))
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r)
}

func TestInvalidRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	with := func(field string, v any) string {
		f := validFields()
		f[field] = v
		return body(f)
	}
	// raw is a valid body without its amount, plus the given literal members.
	raw := func(members string) string {
		return `{"order_id":"o-1","currency":"USD","payment_method":"pm_card_visa",` + members + `}`
	}
	without := func(field string) string {
		f := validFields()
		delete(f, field)
		return body(f)
	}
	cases := []struct {
		name, body, detail string
	}{
		{"bad JSON", `{"order_id":`, ""},
		{"not JSON", `nope`, ""},
		{"empty body", ``, ""},
		{"array body", `[1]`, ""},
		{"two objects", visa("o-1", 500) + visa("o-1", 500), ""},
		{"trailing brace", visa("o-1", 500) + "}", ""},
		{"trailing bracket", visa("o-1", 500) + " ]", ""},
		{"unknown field", with("colour", "red"), "colour"},
		{"missing order_id", without("order_id"), "order_id"},
		{"missing amount", without("amount"), "amount"},
		{"missing currency", without("currency"), "currency"},
		{"missing payment_method", without("payment_method"), "payment_method"},
		{"null amount", with("amount", nil), "amount"},
		{"amount 0", with("amount", 0), "amount"},
		{"amount negative", with("amount", -500), "amount"},
		{"amount 1.5", `{"order_id":"o-1","amount":1.5,"currency":"USD","payment_method":"pm_card_visa"}`, "amount"},
		{"amount too large", with("amount", int64(100000000000)), "amount"},
		{"amount as string", with("amount", "500"), "amount"},
		{"amount as bool", with("amount", true), "amount"},
		{"currency lower case", with("currency", "usd"), "currency"},
		{"currency not ISO 4217", with("currency", "ABC"), "currency"},
		{"currency not a string", with("currency", 840), "currency"},
		{"order_id empty", with("order_id", ""), "order_id"},
		{"order_id 65 chars", with("order_id", strings.Repeat("o", 65)), "order_id"},
		{"payment_method empty", with("payment_method", ""), "payment_method"},
		// Refused by their spelling, before any arithmetic (1e999999 would
		// cost a big-number parser milliseconds of CPU).
		{"amount exponent", raw(`"amount":5e2`), "amount"},
		{"amount huge exponent", raw(`"amount":1e999999`), "amount"},
		{"amount fraction of an integer", raw(`"amount":500.0`), "amount"},
		{"amount 30 digits", raw(`"amount":123456789012345678901234567890`), "amount"},
		{"amount negative zero", raw(`"amount":-0`), "amount"},
		// PostgreSQL stores neither NUL in text nor \u0000 in jsonb.
		{"description NUL", with("description", "a\x00b"), "description"},
		{"metadata value NUL", with("metadata", map[string]string{"k": "a\x00b"}), `metadata["k"]`},
		{"metadata key NUL", with("metadata", map[string]string{"a\x00b": "v"}), "metadata keys"},
		// Raw invalid UTF-8, which encoding/json would silently turn into U+FFFD.
		{"description invalid UTF-8", raw("\"amount\":500,\"description\":\"caf\xe9\""), "description"},
		{"metadata value invalid UTF-8", raw("\"amount\":500,\"metadata\":{\"ok\":\"x\",\"k\":\"\xff\xfe\"}"), `metadata["k"]`},
		{"metadata key invalid UTF-8", raw("\"amount\":500,\"metadata\":{\"ok\":\"x\",\"\xc3\":\"v\"}"), "metadata keys"},
		{"order_id invalid UTF-8", "{\"order_id\":\"o-\xed\xa0\x80\",\"amount\":500,\"currency\":\"USD\",\"payment_method\":\"pm_card_visa\"}", "order_id"},
		{"invalid UTF-8 outside strings", raw("\"amount\":500 \xff"), "request body"},
		// A \u escape of half a surrogate pair is no character either.
		{"description lone high surrogate", raw(`"amount":500,"description":"a\ud800b"`), "description"},
		{"description lone low surrogate", raw(`"amount":500,"description":"\udc00"`), "description"},
		{"metadata value reversed pair", raw(`"amount":500,"metadata":{"k":"\udc00\ud800"}`), `metadata["k"]`},
		{"description high surrogate at the end", raw(`"amount":500,"description":"\ud83d"`), "description"},
		// Which of a repeated member's values counts is up to the parser.
		{"amount twice", raw(`"amount":500,"amount":5`), "amount appears more than once"},
		{"metadata key twice", raw(`"amount":500,"metadata":{"k":"a","k":"b"}`), "metadata.k appears more than once"},
	}
	for _, c := range cases {
		r := b.pay(b.a, "k-"+strings.ReplaceAll(c.name, " ", "-"), c.body)
		require.NoError(t, r.CheckProblem(http.StatusBadRequest, "invalid_request"), c.name)
		if c.detail != "" {
			require.Contains(t, r.Str("detail"), c.detail, "%s: detail names the field", c.name)
		}
	}
	b.requireNothingWritten()

	// A valid description and metadata are kept exactly, non-ASCII included;
	// a surrogate pair is one character, and an escaped backslash before a
	// "u" is no escape.
	r := b.pay(b.a, "k-pair", `{"order_id":"o-pair","amount":500,"currency":"USD","payment_method":"pm_card_visa","description":"\ud83d\ude00 \\ud800"}`)
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r)
	require.Equal(t, "😀 \\ud800", r.Str("description"))
	f := validFields()
	f["order_id"], f["description"], f["metadata"] = "o-utf8", "café ☕ \t tab", map[string]string{"clé": "välue"}
	r = b.pay(b.a, "k-utf8", body(f))
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r)
	require.Equal(t, "café ☕ \t tab", r.Str("description"))
	require.Equal(t, map[string]any{"clé": "välue"}, r.JSON["metadata"])

	// The edges of the valid range are accepted.
	require.Equal(t, http.StatusCreated, b.pay(b.a, "k-max", with("amount", int64(99999999999))).Status)
	f = validFields()
	f["order_id"], f["amount"] = strings.Repeat("o", 64), 1
	require.Equal(t, http.StatusCreated, b.pay(b.a, "k-min", body(f)).Status)
}

func TestInvalidRequestIsNotStored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := validFields()
	f["amount"] = 0
	require.NoError(t, b.pay(b.a, "k-1", body(f)).CheckProblem(http.StatusBadRequest, "invalid_request"))
	require.NoError(t, b.pay(b.a, "k-1", `{"order_id":`).CheckProblem(http.StatusBadRequest, "invalid_request"))
	b.requireNothingWritten()

	r := b.pay(b.a, "k-1", visa("o-1", 500))
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r)
	require.Empty(t, r.Header.Get("Idempotent-Replayed"))
	require.Equal(t, "SUCCEEDED", r.Str("status"))
}

func TestCreateReplayAndMismatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.pay(b.a, "k-1", visa("o-1", 500))
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r)
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	require.Empty(t, r.Header.Get("Idempotent-Replayed"))
	require.True(t, strings.HasPrefix(r.Str("id"), "pay_"), "id %q", r.Str("id"))
	require.Equal(t, "o-1", r.Str("order_id"))
	require.EqualValues(t, 500, r.JSON["amount"])
	require.Equal(t, "USD", r.Str("currency"))
	require.Equal(t, "SUCCEEDED", r.Str("status"))
	require.Equal(t, "sim", r.Str("provider"))
	require.True(t, strings.HasPrefix(r.Str("provider_charge_id"), "ch_"))
	require.Contains(t, r.JSON, "failure_code")
	require.Nil(t, r.JSON["failure_code"])
	for _, f := range []string{"created_at", "updated_at"} {
		_, err := time.Parse(time.RFC3339, r.Str(f))
		require.NoError(t, err, f)
	}
	require.NotContains(t, r.JSON, "tenant_id")

	again := b.pay(b.a, "k-1", visa("o-1", 500))
	require.Equal(t, http.StatusCreated, again.Status)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.JSONEq(t, string(r.Raw), string(again.Raw))

	require.NoError(t, b.pay(b.a, "k-1", visa("o-1", 501)).CheckProblem(http.StatusUnprocessableEntity, "idempotency_key_reused"))

	// A second key for the paid order is refused and names the payment.
	other := b.pay(b.a, "k-2", visa("o-1", 500))
	require.NoError(t, other.CheckProblem(http.StatusConflict, "order_already_has_payment"))
	require.Equal(t, r.Str("id"), other.Str("payment_id"))
}

func TestGetPayment(t *testing.T) {
	t.Parallel()
	b := setup(t)
	created := b.pay(b.a, "k-1", visa("o-1", 500))
	require.Equal(t, http.StatusCreated, created.Status, "body: %s", created)
	id := created.Str("id")

	r := b.get(b.a, "/v1/payments/"+id)
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r)
	require.JSONEq(t, string(created.Raw), string(r.Raw))

	require.NoError(t, b.get(b.a, "/v1/payments/pay_doesnotexist").CheckProblem(http.StatusNotFound, "payment_not_found"))
	// Another tenant's payment does not exist for b.
	require.NoError(t, b.get(b.b, "/v1/payments/"+id).CheckProblem(http.StatusNotFound, "payment_not_found"))
}

// ?sync takes the spellings of strconv.ParseBool: "1" and "T" ask the
// provider about a PENDING payment like "true" does, "0" and "false" do
// not; any other value (an empty one too) is 400 invalid_request naming
// sync, before the payment is even looked up, and changes nothing.
func TestGetPaymentSyncSpellings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pending := func() string {
		t.Helper()
		p := testdb.Attempt(t, b.pool, testdb.AttemptOpts{TenantID: b.a.Tenant.ID, Status: attempts.Pending})
		// The provider made the charge; its answer never reached us.
		charged := proctest.NewClient(b.sim.URL(), "sk_sim").MustDo(t, http.MethodPost, "/v1/charges",
			[]byte(`{"amount":500,"currency":"USD","payment_method":"pm_card_visa","reference":"`+p.ID+`"}`),
			map[string]string{"Idempotency-Key": "psvc_" + p.ID, "Content-Type": "application/json"})
		require.Equal(t, http.StatusCreated, charged.Status, "%s", charged)
		return p.ID
	}
	status := func(id, query string) string {
		t.Helper()
		r := b.get(b.a, "/v1/payments/"+id+query)
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", query, r)
		return r.Str("status")
	}

	id := pending()
	for _, off := range []string{"", "?sync=0", "?sync=false", "?sync=F", "?sync=FALSE"} {
		require.Equal(t, "PENDING", status(id, off), "%q does not ask the provider", off)
	}
	for _, bad := range []string{"?sync=yes", "?sync=on", "?sync=2", "?sync=", "?sync", "?sync=tru"} {
		p := b.get(b.a, "/v1/payments/"+id+bad)
		require.NoError(t, p.CheckProblem(http.StatusBadRequest, "invalid_request"), "%q", bad)
		require.Contains(t, p.Str("detail"), "sync", "%q", bad)
		// Refused before the look-up: a payment that does not exist too.
		require.NoError(t, b.get(b.a, "/v1/payments/pay_doesnotexist"+bad).CheckProblem(http.StatusBadRequest, "invalid_request"), "%q", bad)
	}
	require.Equal(t, "PENDING", status(id, ""), "a refused ?sync changed nothing")
	require.Equal(t, "SUCCEEDED", status(id, "?sync=1"))
	require.Equal(t, "SUCCEEDED", status(pending(), "?sync=T"))
	require.Equal(t, "SUCCEEDED", status(pending(), "?sync=True"))
}

func TestListPaymentsByOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	declined := b.pay(b.a, "k-1", body(map[string]any{"order_id": "o-1", "amount": 500, "currency": "USD", "payment_method": "pm_card_declined"}))
	require.Equal(t, http.StatusPaymentRequired, declined.Status, "body: %s", declined)
	paid := b.pay(b.a, "k-2", visa("o-1", 500))
	require.Equal(t, http.StatusCreated, paid.Status, "body: %s", paid)
	require.Equal(t, http.StatusCreated, b.pay(b.a, "k-3", visa("o-2", 700)).Status)
	// Order ids are per tenant: b pays its own o-1.
	require.Equal(t, http.StatusCreated, b.pay(b.b, "k-1", visa("o-1", 900)).Status)

	r := b.get(b.a, "/v1/payments?order_id=o-1")
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r)
	data, ok := r.JSON["data"].([]any)
	require.True(t, ok, "body: %s", r)
	require.Len(t, data, 2)
	ids := []string{}
	for _, d := range data {
		p := d.(map[string]any)
		ids = append(ids, p["id"].(string))
		require.Equal(t, "o-1", p["order_id"])
	}
	require.ElementsMatch(t, []string{declined.Str("id"), paid.Str("id")}, ids)

	r = b.get(b.a, "/v1/payments?order_id=o-none")
	require.Equal(t, http.StatusOK, r.Status)
	require.JSONEq(t, `{"data":[],"has_more":false}`, string(r.Raw))

	// Without order_id: every payment of the tenant, newest first.
	r = b.get(b.a, "/v1/payments")
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r)
	require.Len(t, r.JSON["data"].([]any), 3)
	require.Equal(t, false, r.JSON["has_more"])
	require.NoError(t, b.get(b.a, "/v1/payments?limit=0").CheckProblem(http.StatusBadRequest, "invalid_request"))
	require.NoError(t, b.get(b.a, "/v1/payments?starting_after=pay_nobody").CheckProblem(http.StatusBadRequest, "invalid_request"))
}
