package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/stretchr/testify/require"

	apispec "github.com/acme/paymentsvc/api"
)

// headerSpecRejects marks a request that the test sends on purpose in a
// form api/openapi.yaml forbids (no API key, an unknown field, …): the
// validator then requires the document to refuse it, so the document and
// the service agree on what is invalid too. The header is not sent.
const headerSpecRejects = "X-Test-Spec-Rejects"

// strictSchemas are the response schemas validated as closed: a field the
// service sends but the document does not describe fails the test. The
// published document leaves them open, because clients must ignore fields
// added later.
var strictSchemas = []string{"Payment", "PaymentList", "Refund", "RefundList", "Problem", "HealthStatus",
	"WebhookEndpoint", "WebhookEndpointWithSecret", "WebhookEndpointList", "WebhookDelivery", "WebhookDeliveryList"}

// specValidator is an http.RoundTripper that validates every request it
// carries and every response it gets against api/openapi.yaml, with
// kin-openapi's openapi3filter, and remembers which documented responses it
// saw.
type specValidator struct {
	t      *testing.T
	next   http.RoundTripper
	doc    *openapi3.T
	router routers.Router
	opts   *openapi3filter.Options

	mu   sync.Mutex
	seen map[string]int // "METHOD /path STATUS"
}

func newSpecValidator(t *testing.T, next http.RoundTripper) *specValidator {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(apispec.OpenAPI)
	require.NoError(t, err, "load api/openapi.yaml")
	for _, name := range strictSchemas {
		ref, ok := doc.Components.Schemas[name]
		require.True(t, ok, "api/openapi.yaml has no schema %s", name)
		closed := false
		ref.Value.AdditionalProperties = openapi3.AdditionalProperties{Has: &closed}
	}
	// The document names the default address; requests go to a pod on a
	// free port.
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	require.NoError(t, err, "router from api/openapi.yaml")
	if next == nil {
		next = http.DefaultTransport
	}
	return &specValidator{
		t: t, next: next, doc: doc, router: router, seen: map[string]int{},
		opts: &openapi3filter.Options{
			IncludeResponseStatus: true,
			MultiError:            true,
			AuthenticationFunc:    checkCredentials,
		},
	}
}

// checkCredentials is the document's security schemes as a validator sees
// them: an Authorization: Bearer header with a token, or the header of the
// webhooks' signature scheme, present and not empty (whether the token is a
// known key, or the signature valid, is for the service to say).
func checkCredentials(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	scheme := in.SecurityScheme
	req := in.RequestValidationInput.Request
	switch {
	case scheme == nil:
		return fmt.Errorf("no security scheme %s", in.SecuritySchemeName)
	case scheme.Type == "http" && strings.EqualFold(scheme.Scheme, "bearer"):
		h := req.Header.Get("Authorization")
		if len(h) < 8 || !strings.EqualFold(h[:7], "bearer ") || strings.TrimSpace(h[7:]) == "" {
			return errors.New("no bearer token")
		}
		return nil
	case scheme.Type == "apiKey" && scheme.In == "header":
		if strings.TrimSpace(req.Header.Get(scheme.Name)) == "" {
			return fmt.Errorf("no %s header", scheme.Name)
		}
		return nil
	}
	return fmt.Errorf("unexpected security scheme %s", in.SecuritySchemeName)
}

// RoundTrip implements http.RoundTripper. It reports mismatches with
// t.Errorf, not require: it runs on whichever goroutine sends the request,
// and only the test's own may stop the test.
func (v *specValidator) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		_ = req.Body.Close()
	}
	expectRejected := req.Header.Get(headerSpecRejects) != ""
	out := req.Clone(req.Context())
	out.Header.Del(headerSpecRejects)
	out.Body = io.NopCloser(bytes.NewReader(body))
	what := req.Method + " " + req.URL.RequestURI()

	vreq := out.Clone(req.Context())
	vreq.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := v.router.FindRoute(vreq)
	if err != nil {
		v.t.Errorf("%s: no such operation in api/openapi.yaml: %v", what, err)
		return v.next.RoundTrip(out)
	}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: v.opts}
	reqErr := openapi3filter.ValidateRequest(req.Context(), in)
	switch {
	case reqErr != nil && !expectRejected:
		v.t.Errorf("%s: request does not match api/openapi.yaml: %v", what, reqErr)
	case reqErr == nil && expectRejected:
		v.t.Errorf("%s: api/openapi.yaml accepts a request the test sends as invalid (headers %v, body %.200q)", what, out.Header, body)
	}

	resp, err := v.next.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	respBody, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	rin := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(respBody)), Options: v.opts,
	}
	if err := openapi3filter.ValidateResponse(req.Context(), rin); err != nil {
		v.t.Errorf("%s: response %d does not match api/openapi.yaml: %v\nheaders: %v\nbody: %.500s", what, resp.StatusCode, err, resp.Header, respBody)
	}
	v.mu.Lock()
	v.seen[route.Method+" "+route.Path+" "+strconv.Itoa(resp.StatusCode)]++
	v.mu.Unlock()
	return resp, nil
}

// wrap returns v in front of next; for opsOptions.transport.
func (v *specValidator) wrap(next http.RoundTripper) http.RoundTripper {
	v.next = next
	return v
}

// requireCovered fails t unless every documented response, except those in
// skip ("METHOD /path STATUS", each of the three "*" for any: "* * 500" is a
// status of every operation, "* /v1/x *" every response of a path), was
// seen: a status documented but never exercised is a status nobody checked.
func (v *specValidator) requireCovered(t *testing.T, skip ...string) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	var missing []string
	for path, item := range v.doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status := range op.Responses.Map() {
				key := method + " " + path + " " + status
				if v.seen[key] > 0 || slices.ContainsFunc(skip, func(s string) bool { return skips(s, method, path, status) }) {
					continue
				}
				missing = append(missing, key)
			}
		}
	}
	slices.Sort(missing)
	require.Empty(t, missing, "documented responses never exercised")
}

// skips reports whether the skip entry s ("METHOD /path STATUS", "*" for
// any of the three) names the response.
func skips(s, method, path, status string) bool {
	f := strings.Fields(s)
	if len(f) != 3 {
		return false
	}
	for i, v := range []string{method, path, status} {
		if f[i] != "*" && f[i] != v {
			return false
		}
	}
	return true
}
