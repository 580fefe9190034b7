package api_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"

	apispec "github.com/acme/paymentsvc/api"
	"github.com/acme/paymentsvc/internal/api"
)

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(apispec.OpenAPI)
	if err != nil {
		t.Fatalf("load api/openapi.yaml: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("api/openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("api/openapi.yaml is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
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
	if !ok {
		t.Fatalf("api.New returned %T, not a chi router", h)
	}
	var served []string
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		served = append(served, method+" "+route)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	slices.Sort(served)
	slices.Sort(documented)
	if !slices.Equal(served, documented) {
		t.Fatalf("routes and api/openapi.yaml differ:\nserved:     %q\ndocumented: %q", served, documented)
	}
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
	sent := stringConsts(t, "../apperr/apperr.go", func(name string, typ ast.Expr) bool {
		id, ok := typ.(*ast.Ident)
		return ok && id.Name == "Code"
	})
	slices.Sort(sent)
	sent = slices.Compact(sent)
	slices.Sort(documented)
	if !slices.Equal(sent, documented) {
		t.Fatalf("problem codes differ:\nin the code:            %q\nin api/openapi.yaml:    %q", sent, documented)
	}
}

// stringConsts returns the values of the string constants of file that keep
// says are error codes.
func stringConsts(t *testing.T, file string, keep func(name string, typ ast.Expr) bool) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i >= len(vs.Values) || !keep(name.Name, vs.Type) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, v)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no error codes found in %s", file)
	}
	return out
}
