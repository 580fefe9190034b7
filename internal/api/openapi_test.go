package api_test

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	apispec "github.com/acme/paymentsvc/api"
	"github.com/acme/paymentsvc/internal/api"
	"github.com/acme/paymentsvc/internal/testkit"
)

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(apispec.OpenAPI)
	require.NoError(t, err, "load api/openapi.yaml")
	require.NoError(t, doc.Validate(context.Background()), "api/openapi.yaml is not a valid OpenAPI document")
	require.True(t, doc.IsOpenAPI31OrLater(), "api/openapi.yaml is OpenAPI %s, want 3.1", doc.OpenAPI)
	return doc
}

// TestOpenAPIDescribesEveryRoute compares the router's routes with the
// document's operations, both ways: a route added without documentation, or
// documentation of a route that does not exist, fails.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	h := api.New(api.Deps{Webhooks: http.NotFoundHandler(), OpenAPI: apispec.OpenAPI, Log: slog.New(slog.DiscardHandler)})
	routes, ok := h.(chi.Routes)
	require.True(t, ok, "api.New returned %T, not a chi router", h)
	var served []string
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		served = append(served, method+" "+route)
		return nil
	})
	require.NoError(t, err)
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	slices.Sort(served)
	slices.Sort(documented)
	require.Equal(t, documented, served, "routes and api/openapi.yaml differ")
}

// TestOpenAPIProblemCodes checks that the Problem code enum is exactly the
// codes the service can send: internal/apperr's, shared by the API and the
// webhook endpoint.
func TestOpenAPIProblemCodes(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	var documented []string
	for _, v := range doc.Components.Schemas["ProblemCode"].Value.Enum {
		documented = append(documented, v.(string))
	}
	var sent []string
	for _, c := range testkit.GoStringConsts(t, "../apperr/apperr.go") {
		if c.Type == "Code" {
			sent = append(sent, c.Value)
		}
	}
	require.NotEmpty(t, sent, "no error codes found in internal/apperr")
	slices.Sort(sent)
	sent = slices.Compact(sent)
	slices.Sort(documented)
	require.Equal(t, documented, sent, "problem codes in internal/apperr and in api/openapi.yaml differ")
}
