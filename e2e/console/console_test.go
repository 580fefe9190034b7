package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// submit presses the button labelled label and waits for the flash of the
// page that answers (the flash of the page before is removed first, so the
// one waited for is the answer's).
func (b *browser) submit(label string) string {
	b.t.Helper()
	eval[bool](b, `(() => { document.querySelectorAll('[data-testid=flash]').forEach(e => e.remove()); return true; })()`)
	b.press(label)
	b.wait("flash")
	return b.text("flash")
}

// csrf is the session's token, from the page's Sign out form.
func (b *browser) csrf() string {
	b.t.Helper()
	return eval[string](b, `document.querySelector('input[name=csrf_token]').value`)
}

// TestSignInAndSignOut: the sign-in form by its labels; a wrong password
// stays on it; a right one opens the overview with an HttpOnly cookie the
// page's script cannot read; Sign out ends the session.
func TestSignInAndSignOut(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	op := s.operator(t, "admin")
	b := newBrowser(t, s.console)
	b.open("/console/")
	require.Equal(t, "/console/login", b.location(), "no session: the sign-in page")
	b.shot("login")
	b.fill("Email", op.Email)
	b.fill("Password", "not-the-password")
	require.Equal(t, "Wrong email or password.", b.submit("Sign in"))
	require.True(t, b.hasButton("Sign in"))

	b.signIn(op.Email, op.Password)
	require.Equal(t, "/console/", b.location())
	require.NotContains(t, eval[string](b, `document.cookie`), "psvc_console", "HttpOnly")
	require.Equal(t, op.Email+" "+op.Role, strings.Join(strings.Fields(b.text("operator")), " "))

	b.press("Sign out")
	b.do(wait(`//button[normalize-space()="Sign in"]`))
	require.Equal(t, "/console/login", b.location())
	b.open("/console/payments")
	require.Equal(t, "/console/login", b.location(), "the session is over")
}

// TestLockoutAnswers429: five failed sign-ins of an email lock it out,
// the right password included; an email nobody has the same way.
func TestLockoutAnswers429(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	op := s.operator(t, "operator")
	b := newBrowser(t, s.console)
	b.open("/console/login")
	for range 5 {
		b.fill("Email", op.Email)
		b.fill("Password", "guess")
		require.Equal(t, "Wrong email or password.", b.submit("Sign in"))
	}
	b.fill("Email", op.Email)
	b.fill("Password", op.Password)
	require.Equal(t, "Too many failed sign-ins for this email. Try again in 15 minutes.", b.submit("Sign in"))
	require.Equal(t, http.StatusTooManyRequests, b.post("/console/login", map[string]string{"email": op.Email, "password": op.Password}))
	ghost := testkit.RandomID("ghost-") + "@example.com"
	for range 5 {
		require.Equal(t, http.StatusUnauthorized, b.post("/console/login", map[string]string{"email": ghost, "password": "guess"}))
	}
	require.Equal(t, http.StatusTooManyRequests, b.post("/console/login", map[string]string{"email": ghost, "password": "guess"}))
}

// TestOverviewSearchAndAPaymentsPage: the overview counts the day's
// payments per status (0 included) and lists the stuck one; the search
// finds a payment by its order id; its page tells its story.
func TestOverviewSearchAndAPaymentsPage(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	for i, desc := range []string{"flat white", "two croissants", "beans 1kg"} {
		s.succeeded(t, fmt.Sprintf("order-%d", 1001+i), int64(450+i*800), map[string]any{"description": desc, "metadata": map[string]string{"table": fmt.Sprint(i + 3)}})
	}
	declined := s.pay(t, "order-1004", 990, map[string]any{"payment_method": "pm_card_declined"})
	require.Equal(t, http.StatusPaymentRequired, declined.Status)
	stuck := testdb.Attempt(t, s.db.Pool, testdb.AttemptOpts{TenantID: s.tenant.ID, OrderID: "order-1005", Status: lifecycle.Unknown,
		Provider: "sim", Age: 20 * time.Minute, CheckCount: 6, NeedsReview: true})
	_, b := s.signedIn(t, "viewer")
	want := map[string]string{"CREATED": "0", "PENDING": "0", "AUTHORIZED": "0", "SUCCEEDED": "3", "CANCELED": "0", "FAILED": "1", "UNKNOWN": "1"}
	for st, n := range want {
		require.Equal(t, n, b.text("count-"+st), st)
	}
	require.Equal(t, "1", b.text("count-review"))
	require.Equal(t, "0", b.text("count-deliveries-failing"))
	require.Equal(t, 1, b.count("chart-payments"))
	require.Equal(t, "svg", eval[string](b, `document.querySelector('[data-testid=chart-payments]').tagName`))
	require.Equal(t, 1, b.count("stuck-row"))
	require.Contains(t, b.text("stuck-row"), stuck.ID)
	b.shot("overview")

	b.open("/console/payments")
	require.Equal(t, 5, b.count("payment-row"))
	b.shot("payments")
	b.fill("Search", "order-1002")
	b.pressAndLoad("Search")
	require.Equal(t, 1, b.count("payment-row"))
	require.Equal(t, "/console/payments?q=order-1002&status=&tenant=", b.location())
	b.do(clickLink(`[data-testid=payment-row] a`))
	b.wait("payment-status")
	require.Equal(t, "SUCCEEDED", b.text("payment-status"))
	require.Equal(t, "1250", b.text("payment-amount"))
	require.Equal(t, "order-1002", b.text("payment-order-id"))
	require.Equal(t, "two croissants", b.text("payment-description"))
	require.Equal(t, 3, b.count("timeline-item"))
	items := eval[[]string](b, `[...document.querySelectorAll('[data-testid=timeline-item]')].map(e => e.textContent.replace(/\s+/g, ' ').trim())`)
	require.Regexp(t, `new → CREATED api created`, items[0])
	require.Regexp(t, `CREATED → PENDING api calling provider sim at sim`, items[1])
	require.Regexp(t, `PENDING → SUCCEEDED api provider sim succeeded at sim`, items[2])
	require.Equal(t, 1, b.count("event-row"))
	require.Contains(t, b.text("event-published"), "not published", "the pod's relay is off")
	require.False(t, b.hasButton("Refund"), "a viewer")
	b.shot("payment")
}

// TestSyncOfAnUnknownPayment: the provider charged and its answer was lost;
// an operator syncs the payment from its page: SUCCEEDED, charged once, and
// the timeline names the console and the operator.
func TestSyncOfAnUnknownPayment(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	s.sim.SetFaults(t, providersim.Faults{DropAfterCommit: true})
	r := s.pay(t, "order-lost-answer", 2400, nil)
	require.Equal(t, http.StatusAccepted, r.Status, r.String())
	require.Equal(t, "UNKNOWN", r.Str("status"))
	s.sim.ClearFaults(t)
	id := r.Str("id")
	op, b := s.signedIn(t, "operator")
	b.open(paymentPath(id))
	require.Equal(t, "UNKNOWN", b.text("payment-status"))
	require.False(t, b.hasButton("Refund"), "nothing to refund yet")
	b.shot("payment-unknown")
	require.Equal(t, "Synced with provider: the payment went from UNKNOWN to SUCCEEDED.", b.submit("Sync with provider"))
	require.Equal(t, "SUCCEEDED", b.text("payment-status"))
	require.False(t, b.hasButton("Sync with provider"))
	last := eval[string](b, `[...document.querySelectorAll('[data-testid=timeline-item]')].pop().textContent.replace(/\s+/g, ' ').trim()`)
	require.Contains(t, last, "UNKNOWN → SUCCEEDED console provider reports it succeeded; by operator "+op.Email)
	require.Equal(t, 1, s.sim.SucceededChargesFor(t, id))
	b.shot("payment-synced")
}

// TestRefundSubmittedTwice: the refund form sent twice at once from the
// page, then once more by its button: one refund, here and at the provider.
func TestRefundSubmittedTwice(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	id := s.succeeded(t, "order-refund", 1800, nil)
	op, b := s.signedIn(t, "operator")
	b.open(paymentPath(id))
	b.fill("Amount", "500")
	b.do(setSelect("refund-reason", "duplicate"))
	statuses := eval[[]int](b, `(() => { const f = document.querySelector('form[action$="/refunds"]');
		const send = () => fetch(f.action, {method: "POST", body: new URLSearchParams(new FormData(f))}).then(r => r.status);
		return Promise.all([send(), send()]); })()`)
	for _, st := range statuses {
		require.Contains(t, []int{http.StatusOK, http.StatusConflict}, st, "done, or the same key still in progress")
	}
	flash := b.submit("Refund")
	require.Regexp(t, `^Refund rfd_[0-9a-f]+ of 500 USD: SUCCEEDED\. This form had been sent already: nothing was done again\.$`, flash)
	require.Equal(t, 1, b.count("refund-row"))
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM refunds WHERE payment_id = $1`, id))
	require.Equal(t, int64(1), s.sim.Stats(t).Refunds)
	require.Equal(t, 6, b.count("timeline-item"), "the payment's three rows and the refund's three")
	require.Contains(t, eval[string](b, `document.querySelector('[data-testid=timeline]').textContent`), "by operator "+op.Email)
	b.shot("refund")
}

// TestViewerSeesNoActionsAndIsRefused: no action buttons for a viewer, and
// a POST forged from the viewer's own page (with its session's token)
// answers 403 and refunds nothing.
func TestViewerSeesNoActionsAndIsRefused(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	id := s.succeeded(t, "order-viewer", 700, nil)
	_, b := s.signedIn(t, "viewer")
	b.open(paymentPath(id))
	for _, button := range []string{"Refund", "Sync with provider"} {
		require.False(t, b.hasButton(button), button)
	}
	require.Contains(t, eval[string](b, `document.body.textContent`), "Your role may look but not act.")
	require.Equal(t, http.StatusForbidden, b.post(paymentPath(id)+"/refunds",
		map[string]string{"csrf_token": b.csrf(), "idempotency_key": "forged", "amount": "700"}))
	b.open("/console/tenants")
	require.False(t, b.hasButton("Create tenant"))
	require.Equal(t, http.StatusForbidden, b.post("/console/tenants", map[string]string{"csrf_token": b.csrf(), "idempotency_key": "forged", "name": "x"}))
	require.Zero(t, s.count(t, `SELECT count(*) FROM refunds`))
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM tenants`))

	held := s.authorized(t, "order-viewer-held", 900)
	b.open(paymentPath(held))
	require.Equal(t, "AUTHORIZED", b.text("payment-status"))
	for _, button := range []string{"Capture", "Void", "Retry"} {
		require.False(t, b.hasButton(button), button)
	}
	for path, fields := range map[string]map[string]string{
		"/captures":               {"amount": "900"},
		"/voids":                  {"reason": "duplicate"},
		"/deliveries/whd_1/retry": {},
	} {
		fields["csrf_token"], fields["idempotency_key"] = b.csrf(), "forged"
		require.Equal(t, http.StatusForbidden, b.post(paymentPath(held)+path, fields), path)
	}
	require.Zero(t, s.count(t, `SELECT count(*) FROM captures`))
	require.Equal(t, "AUTHORIZED", b.text("payment-status"))
}

// TestCSRFRefusal: a POST from the operator's own browser without the
// session's token, or with another, answers 403 and changes nothing.
func TestCSRFRefusal(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	id := s.succeeded(t, "order-csrf", 900, nil)
	_, b := s.signedIn(t, "operator")
	b.open(paymentPath(id))
	path := paymentPath(id) + "/refunds"
	require.Equal(t, http.StatusForbidden, b.post(path, map[string]string{"idempotency_key": "k1", "amount": "100"}))
	require.Equal(t, http.StatusForbidden, b.post(path, map[string]string{"csrf_token": "AAAAAAAAAAAAAAAAAAAAAAAAAA", "idempotency_key": "k2", "amount": "100"}))
	require.Equal(t, http.StatusForbidden, b.post(paymentPath(id)+"/sync", map[string]string{"idempotency_key": "k3"}))
	require.Zero(t, s.count(t, `SELECT count(*) FROM refunds`))
	require.Equal(t, http.StatusOK, b.post(path, map[string]string{"csrf_token": b.csrf(), "idempotency_key": "k4", "amount": "100"}), "with the token it acts")
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM refunds`))
}

// TestOriginRefusal: a page of another origin that knows the session's
// token posts the refund form in the operator's browser: 403, no refund.
func TestOriginRefusal(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	id := s.succeeded(t, "order-origin", 900, nil)
	_, b := s.signedIn(t, "operator")
	b.open(paymentPath(id))
	token := b.csrf()
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s%s/refunds">
			<input name="csrf_token" value="%s"><input name="idempotency_key" value="evil"><input name="amount" value="900">
			</form><script>document.getElementById("f").submit()</script>`, s.console, paymentPath(id), token)
	}))
	t.Cleanup(evil.Close)
	b.do(navigate(evil.URL))
	b.wait("flash")
	require.Equal(t, "This form was sent from another site, so nothing was done.", b.text("flash"))
	require.Equal(t, paymentPath(id)+"/refunds", b.location())
	require.Zero(t, s.count(t, `SELECT count(*) FROM refunds`))
}

// TestTextFromTenantsIsShownAsText: markup in a description and in
// metadata is shown as the text it is, and runs nothing.
func TestTextFromTenantsIsShownAsText(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	desc := `<img src=x onerror="document.title='pwned'"><script>document.title='pwned'</script>`
	meta := `<b>bold</b><svg onload="document.title='pwned'"></svg>`
	id := s.succeeded(t, "order-xss", 500, map[string]any{"description": desc, "metadata": map[string]string{"<i>k</i>": meta}})
	_, b := s.signedIn(t, "viewer")
	b.open(paymentPath(id))
	require.Equal(t, desc, b.text("payment-description"))
	require.Zero(t, eval[int](b, `document.querySelectorAll('[data-testid=payment-description] *').length`), "no element made of it")
	cells := eval[[]string](b, `[...document.querySelectorAll('[data-testid=payment-metadata] td')].map(e => e.textContent)`)
	require.Equal(t, []string{"<i>k</i>", meta}, cells)
	require.Zero(t, eval[int](b, `document.querySelectorAll('[data-testid=payment-metadata] td *').length`))
	require.Equal(t, "Payment "+id+" · paymentsvc console", eval[string](b, `document.title`), "no script ran")
}

// TestSessionIdleExpiry: a session unused for CONSOLE_SESSION_TTL opens
// nothing; the next page is the sign-in page.
func TestSessionIdleExpiry(t *testing.T) {
	t.Parallel()
	s := startStack(t, "CONSOLE_SESSION_TTL=2s")
	_, b := s.signedIn(t, "viewer")
	b.open("/console/payments")
	require.Equal(t, "/console/payments", b.location())
	testkit.Eventually(t, time.Minute, "the session unused for 2s", func() bool {
		return s.count(t, `SELECT count(*) FROM console_sessions WHERE last_seen_at < now() - interval '2 seconds'`) == 1
	})
	b.open("/console/payments")
	require.Equal(t, "/console/login", b.location())
}

// TestDisableEndsSessions: `paymentsvc operator disable` ends the
// operator's session at once, and its sign-in fails from then on.
func TestDisableEndsSessions(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	op, b := s.signedIn(t, "admin")
	_, errOut, code := s.paymentsvc(t, "operator", "disable", "--email", op.Email)
	require.Equal(t, 0, code, errOut)
	b.open("/console/")
	require.Equal(t, "/console/login", b.location())
	b.fill("Email", op.Email)
	b.fill("Password", op.Password)
	require.Equal(t, "Wrong email or password.", b.submit("Sign in"))
	require.Equal(t, http.StatusUnauthorized, b.post("/console/login", map[string]string{"email": op.Email, "password": op.Password}))
}

// TestAnomaliesAndTenants: an operator resolves an anomaly with a note and
// finds it among the resolved; an admin creates a tenant and sees its API
// key once, a key the API takes.
func TestAnomaliesAndTenants(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	id := s.succeeded(t, "order-anomaly", 1500, nil)
	testdb.Anomaly(t, s.db.Pool, attempts.Anomaly{Kind: "conflicting_report", AttemptID: id, Source: attempts.SourceWebhook,
		Detail: map[string]any{"status": "SUCCEEDED", "reported": "FAILED", "reason": "charge.failed after charge.succeeded"}})
	op, b := s.signedIn(t, "admin")
	require.Equal(t, "1", b.text("count-anomalies"))
	b.open("/console/anomalies")
	require.Equal(t, 1, b.count("anomaly-row"))
	b.shot("anomalies")
	b.fill("Note", "provider dashboard shows the charge succeeded; the failure event was stale")
	require.Contains(t, b.submit("Resolve"), "resolved.")
	require.Zero(t, b.count("anomaly-row"))
	b.open("/console/anomalies?resolved=true")
	require.Equal(t, op.Email, b.text("anomaly-resolved-by"))
	require.Equal(t, "provider dashboard shows the charge succeeded; the failure event was stale", b.text("anomaly-note"))
	b.shot("anomalies-resolved")

	b.open("/console/tenants")
	require.Equal(t, 1, b.count("tenant-row"))
	b.fill("Name", "Harbour Books")
	flash := b.submit("Create tenant")
	require.Contains(t, flash, "Harbour Books")
	key := b.text("secret")
	require.True(t, strings.HasPrefix(key, "sk_"), key)
	require.Equal(t, 2, b.count("tenant-row"))
	b.shot("tenants")
	list := proctest.NewClient(s.pod.URL(), key).MustGet(t, "/v1/payments")
	require.Equal(t, http.StatusOK, list.Status, "the new key works")
}

// TestAPIListenerDoesNotServeTheConsole: /console/… is 404 on the tenant
// API's listener, and the console's listener serves no API.
func TestAPIListenerDoesNotServeTheConsole(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	for _, path := range []string{"/console/", "/console/login", "/console/static/console.css"} {
		res, err := http.Get(s.pod.URL() + path)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusNotFound, res.StatusCode, path)
	}
	for _, path := range []string{"/v1/payments", "/healthz", "/metrics"} {
		res, err := http.Get(s.console + path)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusNotFound, res.StatusCode, path)
	}
	res, err := http.Get(s.console + "/console/login")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
}
