package console_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/console"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/operators"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testdb"
)

const simAPIKey = "sk_sim"

// bundle is one test's console: its database with a tenant, a simulator in
// process, the payments service on it, and the console behind an
// httptest server.
type bundle struct {
	t        *testing.T
	pool     *db.Pool
	sim      *proctest.Sim
	svc      *payments.Service
	srv      *httptest.Server
	tenantID string
	apiKey   string
}

func setup(t *testing.T) *bundle {
	t.Helper()
	d := testdb.New(t)
	b := &bundle{t: t, pool: d.Pool, sim: proctest.ServeSim(t, providersim.Config{APIKey: simAPIKey}, nil)}
	// Timings with room for a loaded machine: no test here waits for a
	// lock to expire or a call to time out; and a breaker that does not
	// open on the failed tries of a lost answer (the sync that follows
	// must reach the provider).
	cfg := payments.Config{LockTTL: 10 * time.Second, KeyTTL: time.Hour, CallTimeout: 5 * time.Second, RetryBudget: 2 * time.Second}
	svc, err := payments.NewService(d.Pool, b.sim.Provider(simAPIKey, provider.Config{
		CallTimeout: cfg.CallTimeout, RetryBudget: cfg.RetryBudget, BreakerFailures: 1000, BreakerCooldown: time.Minute,
	}), cfg, nil)
	require.NoError(t, err)
	b.svc = svc
	tn := testdb.Tenant(t, d.Pool, testdb.TenantOpts{Name: "shop"})
	b.tenantID, b.apiKey = tn.ID, tn.APIKey
	b.srv = httptest.NewServer(console.New(console.Deps{
		Pool: d.Pool, Payments: svc, Sessions: operators.NewSessions(d.Pool, operators.Config{}),
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// agent is one browser: a cookie jar, redirects not followed (tests look
// at the 303s themselves).
type agent struct {
	t      *testing.T
	base   string
	client *http.Client
}

func (b *bundle) agent() *agent {
	jar, err := cookiejar.New(nil)
	require.NoError(b.t, err)
	return &agent{t: b.t, base: b.srv.URL, client: &http.Client{
		Jar: jar, Timeout: time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// signIn makes an operator with role and returns an agent signed in as it.
func (b *bundle) signIn(role operators.Role) (*agent, operators.Created) {
	b.t.Helper()
	op := testdb.Operator(b.t, b.pool, "", role)
	a := b.agent()
	res := a.post("/console/login", url.Values{"email": {op.Email}, "password": {op.Password}}, nil)
	require.Equal(b.t, http.StatusSeeOther, res.status, res.body)
	require.Equal(b.t, "/console/", res.header.Get("Location"))
	return a, op
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (a *agent) do(req *http.Request) answer {
	a.t.Helper()
	res, err := a.client.Do(req)
	require.NoError(a.t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(a.t, err)
	return answer{status: res.StatusCode, header: res.Header, body: string(body)}
}

func (a *agent) get(path string) answer {
	a.t.Helper()
	req, err := http.NewRequest(http.MethodGet, a.base+path, nil)
	require.NoError(a.t, err)
	return a.do(req)
}

// post sends form to path as a same-origin form would, with extra headers.
func (a *agent) post(path string, form url.Values, headers map[string]string) answer {
	a.t.Helper()
	req, err := http.NewRequest(http.MethodPost, a.base+path, strings.NewReader(form.Encode()))
	require.NoError(a.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return a.do(req)
}

var (
	csrfRE  = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)
	flashRE = regexp.MustCompile(`(?s)data-testid="flash"[^>]*>(.*?)</div>`)
)

// csrf is the session's token in a page.
func csrf(t *testing.T, page string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(page)
	require.NotNil(t, m, "no CSRF token in the page")
	return m[1]
}

// formKeyOf is the idempotency key of the form posting to action.
func formKeyOf(t *testing.T, page, action string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)action="` + regexp.QuoteMeta(action) + `".*?name="idempotency_key" value="([^"]+)"`).FindStringSubmatch(page)
	require.NotNil(t, m, "no form posting to %s", action)
	return m[1]
}

// flashOf is the text of the page's flash ("" if none).
func flashOf(page string) string {
	m := flashRE.FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return strings.Join(strings.Fields(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m[1], " ")), " ")
}

// count is how many elements of the page carry data-testid id.
func count(page, id string) int { return strings.Count(page, `data-testid="`+id+`"`) }

// testid is the text of the first element with data-testid id.
func testid(t *testing.T, page, id string) string {
	t.Helper()
	m := regexp.MustCompile(`data-testid="` + regexp.QuoteMeta(id) + `"[^>]*>([^<]*)<`).FindStringSubmatch(page)
	require.NotNil(t, m, "no %s in the page", id)
	return m[1]
}
