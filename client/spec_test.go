package client_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	apispec "github.com/acme/paymentsvc/api"
	"github.com/acme/paymentsvc/client"
	"github.com/acme/paymentsvc/internal/testkit"
)

// specOp is one operation the client calls, and the Go types it sends and
// reads.
type specOp struct {
	method, path string
	key          bool        // sends an Idempotency-Key
	request      any         // the JSON body's type; nil for none
	responses    map[int]any // the non-problem answers' types, by status
	params       any         // the query parameters' struct; nil for none
	sync         bool        // SyncX methods send ?sync=true
}

// clientOps are every operation of the client, which must be every /v1
// operation of the document but the provider's webhooks.
var clientOps = []specOp{
	{method: "POST", path: "/v1/payments", key: true, request: client.CreatePaymentRequest{},
		responses: map[int]any{201: client.Payment{}, 202: client.Payment{}, 402: client.Payment{}}},
	{method: "GET", path: "/v1/payments", responses: map[int]any{200: client.PaymentList{}}, params: client.ListPaymentsParams{}},
	{method: "GET", path: "/v1/payments/{id}", responses: map[int]any{200: client.Payment{}}, sync: true},
	{method: "POST", path: "/v1/payments/{id}/refunds", key: true, request: client.CreateRefundRequest{},
		responses: map[int]any{201: client.Refund{}, 202: client.Refund{}, 402: client.Refund{}}},
	{method: "GET", path: "/v1/payments/{id}/refunds", responses: map[int]any{200: client.RefundList{}}, params: client.ListRefundsParams{}},
	{method: "GET", path: "/v1/refunds/{id}", responses: map[int]any{200: client.Refund{}}, sync: true},
	{method: "POST", path: "/v1/payments/{id}/captures", key: true, request: client.CreateCaptureRequest{},
		responses: map[int]any{201: client.Capture{}, 202: client.Capture{}, 402: client.Capture{}}},
	{method: "POST", path: "/v1/payments/{id}/voids", key: true, request: client.CreateVoidRequest{},
		responses: map[int]any{201: client.Void{}, 202: client.Void{}, 402: client.Void{}}},
	{method: "GET", path: "/v1/captures/{id}", responses: map[int]any{200: client.Capture{}}, sync: true},
	{method: "GET", path: "/v1/voids/{id}", responses: map[int]any{200: client.Void{}}, sync: true},
	{method: "PUT", path: "/v1/routing", request: client.Routing{}, responses: map[int]any{200: client.Routing{}}},
	{method: "GET", path: "/v1/routing", responses: map[int]any{200: client.Routing{}}},
	{method: "POST", path: "/v1/webhook_endpoints", request: client.CreateWebhookEndpointRequest{},
		responses: map[int]any{201: client.WebhookEndpointWithSecret{}}},
	{method: "GET", path: "/v1/webhook_endpoints", responses: map[int]any{200: client.WebhookEndpointList{}}, params: client.ListWebhookEndpointsParams{}},
	{method: "GET", path: "/v1/webhook_endpoints/{id}", responses: map[int]any{200: client.WebhookEndpoint{}}},
	{method: "DELETE", path: "/v1/webhook_endpoints/{id}", responses: map[int]any{}},
	{method: "POST", path: "/v1/webhook_endpoints/{id}/rotate_secret", responses: map[int]any{200: client.WebhookEndpointWithSecret{}}},
	{method: "GET", path: "/v1/webhook_endpoints/{id}/deliveries", responses: map[int]any{200: client.WebhookDeliveryList{}}, params: client.ListWebhookDeliveriesParams{}},
	{method: "POST", path: "/v1/webhook_deliveries/{id}/retry", responses: map[int]any{202: client.WebhookDelivery{}}},
}

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(apispec.OpenAPI)
	require.NoError(t, err, "load api/openapi.yaml")
	require.NoError(t, doc.Validate(context.Background()), "api/openapi.yaml is not a valid OpenAPI document")
	return doc
}

// TestSpecEveryOperationHasAClientMethod compares the document's /v1
// operations with the client's, both ways, so that an endpoint added to
// the API without a client method fails here.
func TestSpecEveryOperationHasAClientMethod(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	var documented []string
	for path, item := range doc.Paths.Map() {
		if !strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/v1/webhooks/") {
			continue // the provider's endpoints, not the tenant's
		}
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	var called []string
	for _, op := range clientOps {
		if doc.Paths.Find(op.path) != nil && doc.Paths.Find(op.path).GetOperation(op.method) != nil {
			called = append(called, op.method+" "+op.path)
		} else {
			t.Logf("%s %s is not in api/openapi.yaml: the client calls it, its types are checked once the document describes it", op.method, op.path)
		}
	}
	sort.Strings(documented)
	sort.Strings(called)
	require.Equal(t, documented, called, "the document's /v1 operations and the client's differ")
}

// TestSpecClientTypesMatchSchemas checks every field of every type the
// client sends or reads against the document's schema of that operation,
// both ways: JSON names, required (no omitempty) or optional (omitempty),
// nullable (a pointer; or omitempty in a request, since the API reads null
// and absent alike), types, and enums (the Go constants of Status, Code and
// RefundReason are exactly the schema's values). Problem answers are
// checked against Problem, and their codes against the Code constants.
func TestSpecClientTypesMatchSchemas(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	ck := &checker{enums: goEnums(t)}
	for _, op := range clientOps {
		t.Run(op.method+" "+op.path, func(t *testing.T) {
			t.Parallel()
			item := doc.Paths.Find(op.path)
			if item == nil || item.GetOperation(op.method) == nil {
				t.Skipf("%s %s is not described in api/openapi.yaml: nothing to check against", op.method, op.path)
			}
			o := item.GetOperation(op.method)
			var errs []string
			ck.operation(&errs, op, o)
			require.Empty(t, errs, "client types and api/openapi.yaml differ:\n%s", strings.Join(errs, "\n"))
		})
	}
}

// TestSpecEnumsMatchConstants checks the named enums of the document
// against the client's constants, both ways.
func TestSpecEnumsMatchConstants(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	enums := goEnums(t)
	for schema, goType := range map[string]string{"PaymentStatus": "Status", "ProblemCode": "Code"} {
		s := doc.Components.Schemas[schema]
		require.NotNil(t, s, "schema %s", schema)
		require.ElementsMatch(t, specEnum(s.Value), enums[goType], "%s enum and client.%s constants differ", schema, goType)
	}
}

// checker compares Go types with schemas; enums maps a Go type's name to
// its constants' values.
type checker struct {
	enums map[string][]string
}

func (c *checker) operation(errs *[]string, op specOp, o *openapi3.Operation) {
	fail := func(format string, args ...any) { *errs = append(*errs, fmt.Sprintf(format, args...)) }

	// The request body.
	var reqSchema *openapi3.SchemaRef
	if o.RequestBody != nil && o.RequestBody.Value != nil {
		if mt := o.RequestBody.Value.Content.Get("application/json"); mt != nil {
			reqSchema = mt.Schema
		}
	}
	switch {
	case op.request == nil && reqSchema != nil:
		fail("request: the document has a JSON body, the client sends none")
	case op.request != nil && reqSchema == nil:
		fail("request: the client sends %T, the document has no JSON body", op.request)
	case op.request != nil:
		c.check(errs, "request", reflect.TypeOf(op.request), reqSchema)
	}

	// The answers, both ways.
	for code, resp := range o.Responses.Map() {
		status, err := strconv.Atoi(code)
		if err != nil || resp.Value == nil {
			fail("response %s: not a status", code)
			continue
		}
		where := "response " + code
		if mt := resp.Value.Content.Get("application/problem+json"); mt != nil {
			c.check(errs, where, reflect.TypeFor[client.Problem](), mt.Schema)
			for _, code := range narrowedCodes(mt.Schema.Value) {
				if !slices.Contains(c.enums["Code"], code) {
					fail("%s: code %q has no client.Code constant", where, code)
				}
			}
			continue
		}
		mt := resp.Value.Content.Get("application/json")
		want, ok := op.responses[status]
		switch {
		case mt == nil && ok:
			fail("%s: the client reads %T, the document has no JSON body", where, want)
		case mt != nil && !ok:
			fail("%s: a JSON answer the client does not read", where)
		case mt != nil:
			c.check(errs, where, reflect.TypeOf(want), mt.Schema)
		}
	}
	for status, want := range op.responses {
		if o.Responses.Status(status) == nil {
			fail("response %d: the client reads %T, the document has no such answer", status, want)
		}
	}

	// Parameters: the Idempotency-Key header and the query, both ways.
	key := false
	var query []string
	for _, p := range o.Parameters {
		switch {
		case p.Value.In == "header" && p.Value.Name == "Idempotency-Key":
			key = p.Value.Required
		case p.Value.In == "query":
			query = append(query, p.Value.Name)
			if op.params != nil {
				if f, ok := queryField(reflect.TypeOf(op.params), p.Value.Name); ok {
					c.check(errs, "query "+p.Value.Name, f.Type, p.Value.Schema)
				}
			}
		}
	}
	if key != op.key {
		fail("Idempotency-Key: required by the document %v, sent by the client %v", key, op.key)
	}
	var sent []string
	if op.params != nil {
		for f := range reflect.TypeOf(op.params).Fields() {
			sent = append(sent, f.Tag.Get("query"))
		}
	}
	if op.sync {
		sent = append(sent, "sync")
	}
	sort.Strings(query)
	sort.Strings(sent)
	if !slices.Equal(query, sent) {
		fail("query parameters: document %v, client %v", query, sent)
	}
}

// check compares the Go type gt (a pointer's element) with schema s at where.
func (c *checker) check(errs *[]string, where string, gt reflect.Type, s *openapi3.SchemaRef) {
	fail := func(format string, args ...any) { *errs = append(*errs, where+": "+fmt.Sprintf(format, args...)) }
	if gt.Kind() == reflect.Pointer {
		gt = gt.Elem()
	}
	v := base(s)
	if v == nil {
		fail("no schema")
		return
	}
	typ := nonNullType(v)
	switch {
	case gt == reflect.TypeFor[time.Time]():
		if typ != "string" || v.Format != "date-time" {
			fail("time.Time, schema %s format %q", typ, v.Format)
		}
	case gt.Kind() == reflect.Struct:
		if typ != "object" && typ != "" {
			fail("struct %s, schema %s", gt.Name(), typ)
		}
		c.fields(errs, where, gt, v)
	case gt.Kind() == reflect.Map:
		if typ != "object" || v.AdditionalProperties.Schema == nil || gt.Key().Kind() != reflect.String {
			fail("map, schema %s without additionalProperties", typ)
			return
		}
		c.check(errs, where+"[]", gt.Elem(), v.AdditionalProperties.Schema)
	case gt.Kind() == reflect.Slice:
		if typ != "array" || v.Items == nil {
			fail("slice, schema %s", typ)
			return
		}
		c.check(errs, where+"[]", gt.Elem(), v.Items)
	case gt.Kind() == reflect.String:
		if typ != "string" {
			fail("string, schema %s", typ)
		}
		consts, named := c.enums[gt.Name()]
		enum := specEnum(v)
		switch {
		case named && !sameSet(consts, enum):
			fail("client.%s constants %v, schema enum %v", gt.Name(), consts, enum)
		case !named && len(enum) > 0:
			fail("plain %s, schema enum %v: want a type with constants", gt, enum)
		}
	case gt.Kind() == reflect.Int || gt.Kind() == reflect.Int64:
		if typ != "integer" {
			fail("%s, schema %s", gt, typ)
		}
	case gt.Kind() == reflect.Bool:
		if typ != "boolean" {
			fail("bool, schema %s", typ)
		}
	default:
		fail("Go type %s not handled by the check", gt)
	}
}

// fields compares a struct's JSON fields with an object schema's properties.
func (c *checker) fields(errs *[]string, where string, gt reflect.Type, v *openapi3.Schema) {
	fail := func(format string, args ...any) { *errs = append(*errs, where+": "+fmt.Sprintf(format, args...)) }
	seen := map[string]bool{}
	for f := range gt.Fields() {
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		omitempty := strings.Contains(opts, "omitempty")
		seen[name] = true
		prop, ok := v.Properties[name]
		if !ok {
			fail("%s.%s (%q) is not a property of the schema", gt.Name(), f.Name, name)
			continue
		}
		required := slices.Contains(v.Required, name)
		if required == omitempty {
			fail("%q: required %v in the schema, omitempty %v in %s.%s", name, required, omitempty, gt.Name(), f.Name)
		}
		nullable := prop.Value.Nullable || prop.Value.Type.IncludesNull()
		pointer := f.Type.Kind() == reflect.Pointer
		if nullable && !pointer && !omitempty {
			fail("%q may be null in the schema: %s.%s should be a pointer", name, gt.Name(), f.Name)
		}
		if pointer && !nullable && !omitempty {
			fail("%q is never null in the schema: %s.%s should not be a pointer", name, gt.Name(), f.Name)
		}
		c.check(errs, where+"."+name, f.Type, prop)
	}
	for name := range v.Properties {
		if !seen[name] {
			fail("property %q has no field in %s", name, gt.Name())
		}
	}
}

// base is the schema a Go type stands for: the schema itself, or for an
// allOf (a $ref narrowed by a constant status or code) the referenced one.
func base(s *openapi3.SchemaRef) *openapi3.Schema {
	if s == nil || s.Value == nil {
		return nil
	}
	if len(s.Value.AllOf) == 0 {
		return s.Value
	}
	for _, m := range s.Value.AllOf {
		if m.Ref != "" {
			return m.Value
		}
	}
	return nil
}

// narrowedCodes are the codes an allOf member allows (const or enum).
func narrowedCodes(v *openapi3.Schema) []string {
	var out []string
	for _, m := range v.AllOf {
		if m.Ref != "" || m.Value == nil {
			continue
		}
		if code := m.Value.Properties["code"]; code != nil {
			if s, ok := code.Value.Const.(string); ok {
				out = append(out, s)
			}
			out = append(out, specEnum(code.Value)...)
		}
	}
	return out
}

func nonNullType(v *openapi3.Schema) string {
	if v.Type == nil {
		return ""
	}
	for _, t := range v.Type.Slice() {
		if t != "null" {
			return t
		}
	}
	return ""
}

func specEnum(v *openapi3.Schema) []string {
	var out []string
	for _, e := range v.Enum {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}

func queryField(t reflect.Type, name string) (reflect.StructField, bool) {
	for f := range t.Fields() {
		if f.Tag.Get("query") == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// goEnums reads the client's string constants by their type's name.
func goEnums(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	out := map[string][]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		for _, c := range testkit.GoStringConsts(t, f) {
			if c.Type != "" {
				out[c.Type] = append(out[c.Type], c.Value)
			}
		}
	}
	require.NotEmpty(t, out["Status"])
	require.NotEmpty(t, out["Code"])
	require.NotEmpty(t, out["RefundReason"])
	return out
}

// TestSpecCheckerCatchesDrift feeds the checker types that drift from the
// Payment schema in each way it looks for, so that a check that passes
// cannot be a check that sees nothing.
func TestSpecCheckerCatchesDrift(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	payment := doc.Components.Schemas["Payment"]
	type (
		Status       string
		missingField struct {
			Amount int64 `json:"amount"`
		}
		wrongType struct {
			ID int64 `json:"id"`
		}
		optionalNoOmit struct {
			Description string `json:"description"`
		}
		requiredOmit struct {
			ID string `json:"id,omitempty"`
		}
		nullableValue struct {
			FailureCode string `json:"failure_code"`
		}
		pointerNotNull struct {
			Amount *int64 `json:"amount"`
		}
		enumWithoutType struct {
			Status string `json:"status"`
		}
		enumDrift struct {
			Status Status `json:"status"`
		}
		unknownField struct {
			Colour string `json:"colour"`
		}
	)
	ck := &checker{enums: map[string][]string{"Status": {"CREATED", "PENDING", "SUCCEEDED", "FAILED", "UNKNOWN", "REFUNDED"}}}
	for _, tc := range []struct {
		typ  any
		want string
	}{
		{missingField{}, `property "id" has no field`},
		{wrongType{}, `payment.id: int64, schema string`},
		{optionalNoOmit{}, `"description": required false in the schema, omitempty false`},
		{requiredOmit{}, `"id": required true in the schema, omitempty true`},
		{nullableValue{}, `"failure_code" may be null in the schema`},
		{pointerNotNull{}, `"amount" is never null in the schema`},
		{enumWithoutType{}, `plain string, schema enum`},
		{enumDrift{}, `client.Status constants`},
		{unknownField{}, `("colour") is not a property of the schema`},
	} {
		var errs []string
		ck.check(&errs, "payment", reflect.TypeOf(tc.typ), payment)
		require.Contains(t, strings.Join(errs, "\n"), tc.want, "%T", tc.typ)
	}
}
