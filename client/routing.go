package client

import (
	"context"
	"encoding/json"
	"net/http"
)

// GetRouting returns the tenant's routing rules (none: an empty Rules).
func (c *Client) GetRouting(ctx context.Context) (*Routing, error) {
	return get[Routing](ctx, c, &call{method: http.MethodGet, path: "/v1/routing"})
}

// PutRouting replaces the tenant's routing rules with r and returns them as
// stored; an empty r clears them. Rules apply to payments created after it.
// A PUT is idempotent by itself, so it is retried like a read.
// Errors: a *Problem with CodeInvalidRequest (an unknown provider, an empty
// providers list, a rule after a rule without a currency; nothing changed).
func (c *Client) PutRouting(ctx context.Context, r Routing) (*Routing, error) {
	if r.Rules == nil {
		r.Rules = []RoutingRule{} // {"rules":[]} clears; null is refused
	}
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return get[Routing](ctx, c, &call{method: http.MethodPut, path: "/v1/routing", body: body})
}
