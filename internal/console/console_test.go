package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/operators"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/refunds"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// pay makes a payment through the service (a real charge at the simulator)
// and returns it as stored.
func (b *bundle) pay(amount int64, description *string, meta map[string]string) attempts.Attempt {
	b.t.Helper()
	reply, err := b.svc.Create(b.t.Context(), payments.CreateInput{
		TenantID: b.tenantID, IdempotencyKey: testkit.RandomID("k-"), Fingerprint: testdb.Fingerprint,
		OrderID: testkit.RandomID("order-"), Amount: amount, Currency: "USD", PaymentMethod: "pm_card_visa",
		Description: description, Metadata: meta,
	})
	require.NoError(b.t, err)
	p, err := attempts.Get(b.t.Context(), b.pool, reply.PaymentID)
	require.NoError(b.t, err)
	return p
}

func (b *bundle) refundsOf(id string) []refunds.Refund {
	b.t.Helper()
	rs, err := refunds.OfPayment(b.t.Context(), b.pool, id)
	require.NoError(b.t, err)
	return rs
}

// TestEveryAnswerCarriesTheSecurityHeaders: pages, redirects, errors,
// refusals and static files alike.
func TestEveryAnswerCarriesTheSecurityHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	anon := b.agent()
	op, _ := b.signIn(operators.Viewer)
	answers := map[string]answer{
		"login page":       anon.get("/console/login"),
		"redirect":         anon.get("/console/payments"),
		"static":           anon.get("/console/static/console.css"),
		"not found":        op.get("/console/nothing-here"),
		"overview":         op.get("/console/"),
		"forbidden":        op.get("/console/operators"),
		"no csrf":          op.post("/console/tenants", url.Values{"name": {"x"}}, nil),
		"bad sign-in":      anon.post("/console/login", url.Values{"email": {"a@b.c"}, "password": {"x"}}, nil),
		"cross-origin":     op.post("/console/logout", nil, map[string]string{"Origin": "http://evil.example"}),
		"method not found": anon.do(mustRequest(t, http.MethodDelete, b.srv.URL+"/console/login")),
	}
	for name, a := range answers {
		h := a.header
		csp := h.Get("Content-Security-Policy")
		require.Contains(t, csp, "default-src 'self'", name)
		require.Contains(t, csp, "frame-ancestors 'none'", name)
		require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"), name)
		require.Equal(t, "same-origin", h.Get("Referrer-Policy"), name)
		require.Equal(t, "no-store", h.Get("Cache-Control"), name)
	}
	require.Equal(t, http.StatusOK, answers["static"].status)
	require.Equal(t, http.StatusNotFound, answers["not found"].status)
	require.Equal(t, http.StatusForbidden, answers["forbidden"].status)
	require.Equal(t, http.StatusForbidden, answers["no csrf"].status)
	require.Equal(t, http.StatusForbidden, answers["cross-origin"].status)
}

func mustRequest(t *testing.T, method, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	require.NoError(t, err)
	return req
}

// TestPagesWithoutASessionRedirectToSignIn: every page but the sign-in
// page answers 303 to it, for a missing and for a made-up cookie.
func TestPagesWithoutASessionRedirectToSignIn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	anon := b.agent()
	forged := b.agent()
	u, err := url.Parse(b.srv.URL + "/console/")
	require.NoError(t, err)
	forged.client.Jar.SetCookies(u, []*http.Cookie{{Name: "psvc_console", Value: "AAAAAAAAAAAAAAAAAAAAAAAAAA", Path: "/console"}})
	for _, path := range []string{"/console/", "/console/payments", "/console/payments/pay_x", "/console/anomalies", "/console/tenants", "/console/operators"} {
		for _, a := range []*agent{anon, forged} {
			res := a.get(path)
			require.Equal(t, http.StatusSeeOther, res.status, path)
			require.Equal(t, "/console/login", res.header.Get("Location"), path)
		}
	}
	login := anon.get("/console/login")
	require.Equal(t, http.StatusOK, login.status)
	for _, s := range []string{`<label for="email">Email</label>`, `<label for="password">Password</label>`, `<button type="submit">Sign in</button>`} {
		require.Contains(t, login.body, s)
	}
}

// TestSignIn: a wrong password and an unknown email get the same 401 page;
// a good one sets the session cookie with its attributes and answers 303
// to the overview; the sixth try after five failures answers 429.
func TestSignIn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	op := testdb.Operator(t, b.pool, "", operators.Operator)
	a := b.agent()
	wrong := a.post("/console/login", url.Values{"email": {op.Email}, "password": {"nope"}}, nil)
	unknown := a.post("/console/login", url.Values{"email": {"nobody@example.com"}, "password": {"nope"}}, nil)
	require.Equal(t, http.StatusUnauthorized, wrong.status)
	require.Equal(t, http.StatusUnauthorized, unknown.status)
	require.Equal(t, strings.ReplaceAll(wrong.body, op.Email, "E"), strings.ReplaceAll(unknown.body, "nobody@example.com", "E"),
		"the same answer, whichever was wrong")
	require.Equal(t, "Wrong email or password.", flashOf(wrong.body))
	require.Empty(t, wrong.header.Values("Set-Cookie"))

	ok := a.post("/console/login", url.Values{"email": {op.Email}, "password": {op.Password}}, nil)
	require.Equal(t, http.StatusSeeOther, ok.status)
	require.Equal(t, "/console/", ok.header.Get("Location"))
	cookie := ok.header.Get("Set-Cookie")
	require.True(t, strings.HasPrefix(cookie, "psvc_console="), cookie)
	for _, attr := range []string{"HttpOnly", "SameSite=Strict", "Path=/console"} {
		require.Contains(t, cookie, attr)
	}
	require.NotContains(t, cookie, "Secure")
	home := a.get("/console/")
	require.Equal(t, http.StatusOK, home.status)
	require.Contains(t, home.body, op.Email)
	before := a.client.Jar.Cookies(mustURL(t, b.srv.URL+"/console/"))
	again := a.post("/console/login", url.Values{"email": {op.Email}, "password": {op.Password}}, nil)
	require.Equal(t, http.StatusSeeOther, again.status)
	require.NotContains(t, again.header.Get("Set-Cookie"), before[0].Value, "a new id at every sign-in")
	stale := b.agent()
	stale.client.Jar.SetCookies(mustURL(t, b.srv.URL+"/console/"), before)
	require.Equal(t, http.StatusSeeOther, stale.get("/console/").status, "the session from before the sign-in ended")

	for range 5 {
		require.Equal(t, http.StatusUnauthorized, a.post("/console/login", url.Values{"email": {op.Email}, "password": {"nope"}}, nil).status)
	}
	locked := a.post("/console/login", url.Values{"email": {op.Email}, "password": {op.Password}}, nil)
	require.Equal(t, http.StatusTooManyRequests, locked.status)
	require.Contains(t, flashOf(locked.body), "Too many failed sign-ins")
}

// TestSignOutEndsTheSession: Sign out is a POST with the token; the cookie
// opens nothing afterwards.
func TestSignOutEndsTheSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, _ := b.signIn(operators.Viewer)
	page := a.get("/console/")
	require.Contains(t, page.body, `<button type="submit" class="link">Sign out</button>`)
	cookies := a.client.Jar.Cookies(mustURL(t, b.srv.URL+"/console/"))
	res := a.post("/console/logout", url.Values{"csrf_token": {csrf(t, page.body)}}, nil)
	require.Equal(t, http.StatusSeeOther, res.status)
	require.Equal(t, "/console/login", res.header.Get("Location"))
	again := b.agent()
	again.client.Jar.SetCookies(mustURL(t, b.srv.URL+"/console/"), cookies) // the old cookie, kept
	require.Equal(t, http.StatusSeeOther, again.get("/console/").status)
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

// TestRefundSentTwiceRefundsOnce: the same form (one idempotency key) sent
// twice makes one refund, at the provider too; the second answer says so;
// the refund's audit rows have source console and name the operator.
func TestRefundSentTwiceRefundsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.pay(1000, nil, nil)
	a, op := b.signIn(operators.Operator)
	page := a.get("/console/payments/" + p.ID)
	action := "/console/payments/" + p.ID + "/refunds"
	form := url.Values{"csrf_token": {csrf(t, page.body)}, "idempotency_key": {formKeyOf(t, page.body, action)},
		"amount": {"400"}, "reason": {"requested_by_customer"}}
	first := a.post(action, form, nil)
	require.Equal(t, http.StatusOK, first.status, flashOf(first.body))
	require.Regexp(t, `^Refund rfd_[0-9a-f]+ of 400 USD: SUCCEEDED\.$`, flashOf(first.body))
	second := a.post(action, form, nil)
	require.Equal(t, http.StatusOK, second.status)
	require.Contains(t, flashOf(second.body), "This form had been sent already: nothing was done again.")
	rs := b.refundsOf(p.ID)
	require.Len(t, rs, 1)
	require.Equal(t, int64(400), rs[0].Amount)
	require.Equal(t, int64(1), b.sim.Stats(t).Refunds, "one refund at the provider")
	require.Equal(t, 1, count(second.body, "refund-row"))

	trail, err := refunds.TimelineOfPayment(t.Context(), b.pool, p.ID, rs)
	require.NoError(t, err)
	require.Len(t, trail, 3) // → CREATED, → PENDING, → SUCCEEDED
	for _, row := range trail {
		require.Equal(t, lifecycle.SourceConsole, row.Source)
		require.Contains(t, row.Reason, "by operator "+op.Email)
	}
	require.Equal(t, 3+3, count(second.body, "timeline-item"), "the payment's three rows and the refund's three")
	require.Contains(t, second.body, "by operator "+op.Email)

	// A new page is a new form: it refunds again, up to what is left.
	page = a.get("/console/payments/" + p.ID)
	form.Set("idempotency_key", formKeyOf(t, page.body, action))
	form.Set("amount", "601")
	over := a.post(action, form, nil)
	require.Equal(t, http.StatusUnprocessableEntity, over.status)
	require.Contains(t, flashOf(over.body), "Refund refused")
	require.Len(t, b.refundsOf(p.ID), 1)
}

// TestSyncResolvesAnUnknownPayment: a payment left UNKNOWN (the provider
// charged, its answer was lost) is synced from its page: SUCCEEDED, with an
// audit row of source console naming the operator.
func TestSyncResolvesAnUnknownPayment(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.sim.SetFaults(t, providersim.Faults{DropAfterCommit: true})
	p := b.pay(700, nil, nil)
	require.Equal(t, lifecycle.Unknown, p.Status)
	b.sim.ClearFaults(t)
	a, op := b.signIn(operators.Operator)
	page := a.get("/console/payments/" + p.ID)
	require.Equal(t, "UNKNOWN", testid(t, page.body, "payment-status"))
	require.Contains(t, page.body, "Sync with provider")
	action := "/console/payments/" + p.ID + "/sync"
	res := a.post(action, url.Values{"csrf_token": {csrf(t, page.body)}, "idempotency_key": {formKeyOf(t, page.body, action)}}, nil)
	require.Equal(t, http.StatusOK, res.status, flashOf(res.body))
	require.Equal(t, "Synced with provider: the payment went from UNKNOWN to SUCCEEDED.", flashOf(res.body))
	require.Equal(t, "SUCCEEDED", testid(t, res.body, "payment-status"))
	trail, err := attempts.Timeline(t.Context(), b.pool, p.ID)
	require.NoError(t, err)
	last := trail[len(trail)-1]
	require.Equal(t, lifecycle.Succeeded, last.To)
	require.Equal(t, lifecycle.SourceConsole, last.Source)
	require.Equal(t, "provider reports it succeeded; by operator "+op.Email, last.Reason)
	require.Equal(t, "sim", last.Provider)
	require.Equal(t, 1, b.sim.SucceededChargesFor(t, p.ID))
	require.NotContains(t, res.body, "Sync with provider</button>", "nothing to sync any more")
}

// TestViewerSeesNoActionsAndIsRefused: a viewer's page has no buttons, and
// a forged POST with the viewer's own token answers 403 and refunds nothing.
func TestViewerSeesNoActionsAndIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.pay(500, nil, nil)
	a, _ := b.signIn(operators.Viewer)
	page := a.get("/console/payments/" + p.ID)
	require.Equal(t, http.StatusOK, page.status)
	for _, button := range []string{">Refund</button>", ">Sync with provider</button>", ">Resolve</button>"} {
		require.NotContains(t, page.body, button)
	}
	tenantsPage := a.get("/console/tenants")
	require.NotContains(t, tenantsPage.body, ">Create tenant</button>")
	tok := csrf(t, page.body)
	for _, path := range []string{"/console/payments/" + p.ID + "/refunds", "/console/payments/" + p.ID + "/sync", "/console/tenants", "/console/anomalies/1/resolve"} {
		res := a.post(path, url.Values{"csrf_token": {tok}, "idempotency_key": {"k"}, "amount": {"100"}, "name": {"t"}, "note": {"n"}}, nil)
		require.Equal(t, http.StatusForbidden, res.status, path)
	}
	require.Empty(t, b.refundsOf(p.ID))
	require.Zero(t, b.sim.Stats(t).Refunds)
}

// TestPostWithoutTheSessionsTokenChangesNothing: no token, another
// session's token, or the right token from another origin: 403, no refund.
func TestPostWithoutTheSessionsTokenChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.pay(500, nil, nil)
	a, _ := b.signIn(operators.Admin)
	other, _ := b.signIn(operators.Admin)
	page := a.get("/console/payments/" + p.ID)
	action := "/console/payments/" + p.ID + "/refunds"
	form := url.Values{"idempotency_key": {formKeyOf(t, page.body, action)}, "amount": {"100"}}
	cases := map[string]struct {
		token   string
		headers map[string]string
	}{
		"no token":           {"", nil},
		"another's token":    {csrf(t, other.get("/console/").body), nil},
		"other Origin":       {csrf(t, page.body), map[string]string{"Origin": "http://evil.example"}},
		"null Origin":        {csrf(t, page.body), map[string]string{"Origin": "null"}},
		"cross-site browser": {csrf(t, page.body), map[string]string{"Sec-Fetch-Site": "cross-site"}},
	}
	for name, c := range cases {
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		if c.token != "" {
			f.Set("csrf_token", c.token)
		}
		res := a.post(action, f, c.headers)
		require.Equal(t, http.StatusForbidden, res.status, name)
		require.Contains(t, flashOf(res.body), "nothing was done", name)
	}
	require.Empty(t, b.refundsOf(p.ID))
	ok := a.post(action, url.Values{"csrf_token": {csrf(t, page.body)}, "idempotency_key": form["idempotency_key"], "amount": {"100"}},
		map[string]string{"Origin": b.srv.URL, "Sec-Fetch-Site": "same-origin"})
	require.Equal(t, http.StatusOK, ok.status, flashOf(ok.body))
	require.Len(t, b.refundsOf(p.ID), 1)
}

// TestTextFromTenantsIsShownAsText: markup in a description, metadata and
// an order id is escaped, never interpreted.
func TestTextFromTenantsIsShownAsText(t *testing.T) {
	t.Parallel()
	b := setup(t)
	desc := `<script>alert("d")</script>`
	p := b.pay(500, &desc, map[string]string{`<b>k</b>`: `<img src=x onerror=alert(1)>`})
	a, _ := b.signIn(operators.Viewer)
	page := a.get("/console/payments/" + p.ID)
	require.Equal(t, http.StatusOK, page.status)
	require.NotContains(t, page.body, "<script>alert")
	require.NotContains(t, page.body, "<img src=x")
	require.NotContains(t, page.body, "<b>k</b>")
	require.Contains(t, page.body, `&lt;script&gt;alert(&#34;d&#34;)&lt;/script&gt;`)
	require.Contains(t, page.body, `&lt;img src=x onerror=alert(1)&gt;`)
	require.Contains(t, page.body, `&lt;b&gt;k&lt;/b&gt;`)
}

// TestOverviewCountsEveryStatus: each status has its count, 0 included
// (AUTHORIZED and CANCELED among them), with the chart and the counts of
// what needs a human.
func TestOverviewCountsEveryStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for st, n := range map[lifecycle.Status]int{lifecycle.Succeeded: 3, lifecycle.Failed: 1, lifecycle.Unknown: 2, lifecycle.Pending: 1} {
		for range n {
			testdb.Attempt(t, b.pool, testdb.AttemptOpts{TenantID: b.tenantID, Status: st, NeedsReview: st == lifecycle.Unknown, Age: 2 * time.Minute})
		}
	}
	testdb.Anomaly(t, b.pool, attempts.Anomaly{Kind: "unknown_charge", ChargeID: "ch_x", Detail: map[string]string{"a": "b"}})
	a, _ := b.signIn(operators.Viewer)
	page := a.get("/console/").body
	want := map[string]string{"CREATED": "0", "PENDING": "1", "AUTHORIZED": "0", "SUCCEEDED": "3", "CANCELED": "0", "FAILED": "1", "UNKNOWN": "2"}
	for st, n := range want {
		require.Equal(t, n, testid(t, page, "count-"+st), st)
	}
	require.Equal(t, "1", testid(t, page, "count-anomalies"))
	require.Equal(t, "2", testid(t, page, "count-review"))
	require.Equal(t, "4", testid(t, page, "count-outbox"), "the final payments' events, unpublished")
	require.Equal(t, "0", testid(t, page, "count-deliveries-failing"))
	require.Contains(t, page, `<svg data-testid="chart-payments"`)
	require.Contains(t, page, "7 payments in the last 24 hours")
	require.Equal(t, 3, count(page, "stuck-row"), "the PENDING and UNKNOWN ones, still for 2 minutes")
}
