package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
)

// TestRoutingCurrencyEmptyIsNotACatchAll: a rule without currency matches
// every payment, but `"currency":""` is a currency that is not an ISO 4217
// code: 400 invalid_request, and nothing changes. null is taken as absent.
func TestRoutingCurrencyEmptyIsNotACatchAll(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(b.a)
	put := func(body string) apiclient.Response {
		t.Helper()
		return c.MustDo(t, http.MethodPut, "/v1/routing", []byte(body), map[string]string{"Content-Type": "application/json"})
	}
	stored := `{"rules":[{"currency":"EUR","providers":["sim"]}]}`
	r := put(stored)
	require.Equal(t, http.StatusOK, r.Status, "%s", r)

	for _, bad := range []struct{ body, field string }{
		{`{"rules":[{"currency":"","providers":["sim"]}]}`, "rules[0].currency"},
		{`{"rules":[{"currency":"EUR","providers":["sim"]},{"currency":"","providers":["sim"]}]}`, "rules[1].currency"},
	} {
		r := put(bad.body)
		require.NoError(t, r.CheckProblem(http.StatusBadRequest, "invalid_request"), bad.body)
		require.Contains(t, r.Str("detail"), bad.field, bad.body)
		require.JSONEq(t, stored, string(b.get(b.a, "/v1/routing").Raw), "a refused PUT changes nothing: %s", bad.body)
	}

	r = put(`{"rules":[{"currency":"EUR","providers":["sim"]},{"currency":null,"providers":["sim"]}]}`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	catchAll := `{"rules":[{"currency":"EUR","providers":["sim"]},{"providers":["sim"]}]}`
	require.JSONEq(t, catchAll, string(r.Raw), "null is a rule without currency")
	require.JSONEq(t, catchAll, string(b.get(b.a, "/v1/routing").Raw))
}
