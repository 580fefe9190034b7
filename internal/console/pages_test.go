package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/operators"
	"github.com/acme/paymentsvc/internal/tenants"
	"github.com/acme/paymentsvc/internal/testdb"
)

var nextRE = regexp.MustCompile(`<a href="([^"]+)" rel="next">Next</a>`)

// TestPaymentListPagesAndFilters: newest first, 50 a page with Next while
// more remain; status, tenant and q (payment, order or charge id, exactly)
// filter.
func TestPaymentListPagesAndFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := testdb.Tenant(t, b.pool, testdb.TenantOpts{Name: "other shop"})
	var seeded []testdb.Seeded
	for i := range 52 {
		st := lifecycle.Succeeded
		if i%13 == 0 {
			st = lifecycle.Failed
		}
		seeded = append(seeded, testdb.Attempt(t, b.pool, testdb.AttemptOpts{TenantID: b.tenantID, Status: st, ChargeID: "ch_" + testdbID(i)}))
	}
	theirs := testdb.Attempt(t, b.pool, testdb.AttemptOpts{TenantID: other.ID, Status: lifecycle.Unknown})
	a, _ := b.signIn(operators.Viewer)

	first := a.get("/console/payments")
	require.Equal(t, http.StatusOK, first.status)
	require.Equal(t, 50, count(first.body, "payment-row"))
	require.Contains(t, first.body, `data-testid="payments-table"`)
	m := nextRE.FindStringSubmatch(first.body)
	require.NotNil(t, m, "a Next link")
	second := a.get(htmlUnescape(m[1]))
	require.Equal(t, 3, count(second.body, "payment-row"), "53 in all")
	require.NotRegexp(t, nextRE, second.body)
	require.Contains(t, second.body, seeded[0].ID, "the oldest, last")

	require.Equal(t, 4, count(a.get("/console/payments?status=FAILED").body, "payment-row"))
	byTenant := a.get("/console/payments?tenant=" + other.ID).body
	require.Equal(t, 1, count(byTenant, "payment-row"))
	require.Contains(t, byTenant, theirs.ID)
	for _, q := range []string{seeded[7].ID, seeded[7].OrderID, *seeded[7].ProviderChargeID} {
		res := a.get("/console/payments?q=" + url.QueryEscape(q)).body
		require.Equal(t, 1, count(res, "payment-row"), q)
		require.Contains(t, res, `href="/console/payments/`+seeded[7].ID+`"`)
	}
	require.Equal(t, 0, count(a.get("/console/payments?q="+seeded[7].ID[:10]).body, "payment-row"), "exact matches only")
	require.Equal(t, http.StatusBadRequest, a.get("/console/payments?status=BOGUS").status)
	require.Equal(t, http.StatusBadRequest, a.get("/console/payments?before=pay_nothing").status)
}

func testdbID(i int) string { return string(rune('a'+i%26)) + string(rune('a'+i/26)) }

func htmlUnescape(s string) string { return regexp.MustCompile(`&amp;`).ReplaceAllString(s, "&") }

// TestPaymentPageShowsItsWholeStory: status, amount, order id, timeline
// oldest first from the creation, events and whether they were published.
func TestPaymentPageShowsItsWholeStory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	desc := "two coffees"
	p := b.pay(1250, &desc, map[string]string{"cart": "c-9"})
	a, _ := b.signIn(operators.Viewer)
	page := a.get("/console/payments/" + p.ID)
	require.Equal(t, "SUCCEEDED", testid(t, page.body, "payment-status"))
	require.Equal(t, "1250", testid(t, page.body, "payment-amount"))
	require.Contains(t, page.body, "<strong>12.50 USD</strong>", "the amount in the currency's major unit too")
	require.Contains(t, page.body, "refundable now: 12.50 USD")
	require.Equal(t, p.OrderID, testid(t, page.body, "payment-order-id"))
	require.Equal(t, "two coffees", testid(t, page.body, "payment-description"))
	require.Contains(t, page.body, "<td>cart</td><td>c-9</td>")
	require.Equal(t, 3, count(page.body, "timeline-item"))
	items := regexp.MustCompile(`(?s)data-testid="timeline-item".*?</li>`).FindAllString(page.body, -1)
	require.Regexp(t, `(?s)new → <span class="badge s-CREATED">CREATED</span>.*api.*created`, items[0])
	require.Regexp(t, `(?s)CREATED</span> → <span class="badge s-PENDING">PENDING</span>.*calling provider sim.*at sim`, items[1])
	require.Regexp(t, `(?s)PENDING</span> → <span class="badge s-SUCCEEDED">SUCCEEDED</span>.*provider sim succeeded`, items[2])
	require.Equal(t, 1, count(page.body, "event-row"))
	require.Equal(t, "not published", regexp.MustCompile(`<strong>([^<]+)</strong>`).FindStringSubmatch(
		regexp.MustCompile(`(?s)data-testid="event-published">.*?</td>`).FindString(page.body))[1])
	require.Equal(t, http.StatusNotFound, a.get("/console/payments/pay_nothing").status)
}

// TestResolveAnomaly: an operator resolves an open anomaly with a note,
// once; the resolved list shows who, when and the note.
func TestResolveAnomaly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := testdb.Attempt(t, b.pool, testdb.AttemptOpts{TenantID: b.tenantID, Status: lifecycle.Succeeded})
	testdb.Anomaly(t, b.pool, attempts.Anomaly{Kind: "conflicting_report", AttemptID: p.ID, Detail: map[string]string{"reported": "FAILED"}})
	a, op := b.signIn(operators.Operator)
	page := a.get("/console/anomalies")
	require.Equal(t, 1, count(page.body, "anomaly-row"))
	action := regexp.MustCompile(`action="(/console/anomalies/\d+/resolve)"`).FindStringSubmatch(page.body)[1]
	form := url.Values{"csrf_token": {csrf(t, page.body)}, "idempotency_key": {formKeyOf(t, page.body, action)}, "note": {"provider confirms SUCCEEDED"}}
	first := a.post(action, form, nil)
	require.Equal(t, http.StatusOK, first.status)
	require.Contains(t, flashOf(first.body), "resolved.")
	require.Equal(t, 0, count(first.body, "anomaly-row"))
	second := a.post(action, form, nil)
	require.Contains(t, flashOf(second.body), "was resolved already by "+op.Email)
	resolved := a.get("/console/anomalies?resolved=true").body
	require.Equal(t, 1, count(resolved, "anomaly-row"))
	require.Equal(t, op.Email, testid(t, resolved, "anomaly-resolved-by"))
	require.Equal(t, "provider confirms SUCCEEDED", testid(t, resolved, "anomaly-note"))
	require.Equal(t, "0", testid(t, a.get("/console/").body, "count-anomalies"))
}

// TestCreateTenant: an admin makes a tenant and sees its API key once; the
// form sent twice makes one tenant; the key authenticates.
func TestCreateTenant(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, _ := b.signIn(operators.Admin)
	page := a.get("/console/tenants")
	require.Equal(t, 1, count(page.body, "tenant-row"))
	form := url.Values{"csrf_token": {csrf(t, page.body)}, "idempotency_key": {formKeyOf(t, page.body, "/console/tenants")}, "name": {"<i>new</i> shop"}}
	first := a.post("/console/tenants", form, nil)
	require.Equal(t, http.StatusOK, first.status)
	key := testid(t, first.body, "secret")
	require.Regexp(t, `^sk_[0-9a-f]{48}$`, key)
	tn, err := tenants.Authenticate(t.Context(), b.pool, key)
	require.NoError(t, err)
	require.Equal(t, "<i>new</i> shop", tn.Name)
	require.Equal(t, 2, count(first.body, "tenant-row"))
	require.Contains(t, first.body, "&lt;i&gt;new&lt;/i&gt; shop")
	second := a.post("/console/tenants", form, nil)
	require.Contains(t, flashOf(second.body), "This form had been sent already")
	require.NotContains(t, second.body, key)
	require.Equal(t, 2, count(second.body, "tenant-row"))

	opAgent, _ := b.signIn(operators.Operator)
	opPage := opAgent.get("/console/tenants")
	require.NotContains(t, opPage.body, ">Create tenant</button>")
	require.Equal(t, http.StatusForbidden, opAgent.post("/console/tenants", url.Values{"csrf_token": {csrf(t, opPage.body)}, "idempotency_key": {"x"}, "name": {"n"}}, nil).status)
	require.Equal(t, http.StatusForbidden, opAgent.get("/console/operators").status)
	ops := a.get("/console/operators")
	require.Equal(t, http.StatusOK, ops.status)
	require.Equal(t, 2, count(ops.body, "operator-row"))
}
