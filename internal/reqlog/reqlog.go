// Package reqlog carries what handlers learn about a request (its id, the
// tenant, the payment) to the one log line the API middleware writes for it,
// so handlers in other packages (webhooks) can add to that line too.
package reqlog

import "context"

type ctxKey struct{}

// Fields are the request's log fields. A handler goroutine sets them; the
// middleware reads them after the handler returns.
type Fields struct {
	RequestID string
	TenantID  string
	PaymentID string
}

// With returns ctx carrying f.
func With(ctx context.Context, f *Fields) context.Context {
	return context.WithValue(ctx, ctxKey{}, f)
}

// From returns the fields of ctx; outside a request, a throwaway value.
func From(ctx context.Context) *Fields {
	if f, ok := ctx.Value(ctxKey{}).(*Fields); ok {
		return f
	}
	return &Fields{}
}
