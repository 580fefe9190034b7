package client

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"net/url"
)

// CreateWebhookEndpoint registers an endpoint that receives the tenant's
// events (docs/webhooks.md) and returns it with its signing secret, shown
// this once: store it before anything else. key is the request's
// Idempotency-Key; "" mints one for this call's own retries. With a key
// stored beforehand, a later call with the same key and req replays the
// same endpoint and secret and creates nothing.
// Errors: a *Problem with CodeInvalidRequest (not https://, an unknown event
// type, a 17th endpoint) or CodeIdempotencyKeyReused.
func (c *Client) CreateWebhookEndpoint(ctx context.Context, key string, req CreateWebhookEndpointRequest) (*WebhookEndpointWithSecret, error) {
	if key == "" {
		key = NewKey()
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	return create(ctx, c, &call{method: http.MethodPost, path: "/v1/webhook_endpoints", body: body, key: key},
		func(*WebhookEndpointWithSecret) bool { return true }, func(*NotFinalError, *WebhookEndpointWithSecret) {})
}

// GetWebhookEndpoint returns the endpoint with id (without its secret).
// Errors: a *Problem with CodeWebhookEndpointNotFound.
func (c *Client) GetWebhookEndpoint(ctx context.Context, id string) (*WebhookEndpoint, error) {
	if id == "" {
		return nil, errors.New("paymentsvc: empty webhook endpoint id")
	}
	return get[WebhookEndpoint](ctx, c, &call{method: http.MethodGet, path: "/v1/webhook_endpoints/" + url.PathEscape(id)})
}

// ListWebhookEndpointsPage returns one page of the tenant's endpoints.
func (c *Client) ListWebhookEndpointsPage(ctx context.Context, params ListWebhookEndpointsParams) (*WebhookEndpointList, error) {
	return get[WebhookEndpointList](ctx, c, &call{method: http.MethodGet, path: "/v1/webhook_endpoints", query: queryOf(params)})
}

// ListWebhookEndpoints iterates over the tenant's endpoints, newest first.
func (c *Client) ListWebhookEndpoints(ctx context.Context, params ListWebhookEndpointsParams) iter.Seq2[*WebhookEndpoint, error] {
	if params.Limit == 0 {
		params.Limit = 100
	}
	return paginate(func(after string) ([]WebhookEndpoint, bool, error) {
		page := params
		if after != "" {
			page.StartingAfter = after
		}
		list, err := c.ListWebhookEndpointsPage(ctx, page)
		if err != nil {
			return nil, false, err
		}
		return list.Data, list.HasMore, nil
	}, func(e *WebhookEndpoint) string { return e.ID })
}

// DeleteWebhookEndpoint deletes the endpoint with id; no delivery to it
// starts afterwards. A retry whose first try's answer was lost finds it
// deleted already: that CodeWebhookEndpointNotFound is the only error after a
// retry that means done.
func (c *Client) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("paymentsvc: empty webhook endpoint id")
	}
	cl := &call{method: http.MethodDelete, path: "/v1/webhook_endpoints/" + url.PathEscape(id)}
	cl.accept = func(a *answer) (bool, error) {
		if a.status != http.StatusNoContent {
			return false, unexpected(a, nil)
		}
		return true, nil
	}
	return c.run(ctx, cl)
}

// RotateWebhookEndpointSecret gives the endpoint a new secret and returns
// it, shown this once; the old one signs beside it for 24 hours. It is sent
// once, never retried: a rotation whose answer was lost has happened, and a
// second one would end the old secret's overlap. After such a failure (a
// *NotFinalError), rotate again and deploy the secret it returns: deliveries
// your receiver refuses meanwhile are retried.
func (c *Client) RotateWebhookEndpointSecret(ctx context.Context, id string) (*WebhookEndpointWithSecret, error) {
	if id == "" {
		return nil, errors.New("paymentsvc: empty webhook endpoint id")
	}
	return get[WebhookEndpointWithSecret](ctx, c, &call{
		method: http.MethodPost, path: "/v1/webhook_endpoints/" + url.PathEscape(id) + "/rotate_secret", once: true,
	})
}

// ListWebhookDeliveriesPage returns one page of the endpoint's deliveries.
// Errors: a *Problem with CodeWebhookEndpointNotFound.
func (c *Client) ListWebhookDeliveriesPage(ctx context.Context, endpointID string, params ListWebhookDeliveriesParams) (*WebhookDeliveryList, error) {
	if endpointID == "" {
		return nil, errors.New("paymentsvc: empty webhook endpoint id")
	}
	return get[WebhookDeliveryList](ctx, c, &call{
		method: http.MethodGet, path: "/v1/webhook_endpoints/" + url.PathEscape(endpointID) + "/deliveries", query: queryOf(params),
	})
}

// ListWebhookDeliveries iterates over the endpoint's deliveries, newest first.
func (c *Client) ListWebhookDeliveries(ctx context.Context, endpointID string, params ListWebhookDeliveriesParams) iter.Seq2[*WebhookDelivery, error] {
	if params.Limit == 0 {
		params.Limit = 100
	}
	return paginate(func(after string) ([]WebhookDelivery, bool, error) {
		page := params
		if after != "" {
			page.StartingAfter = after
		}
		list, err := c.ListWebhookDeliveriesPage(ctx, endpointID, page)
		if err != nil {
			return nil, false, err
		}
		return list.Data, list.HasMore, nil
	}, func(d *WebhookDelivery) string { return d.ID })
}

// RetryWebhookDelivery makes a failed or pending delivery try again now,
// with a fresh schedule, and returns it (pending). Errors: a *Problem with
// CodeWebhookDeliveryNotFound, or CodeWebhookDeliveryDelivered (delivered
// already, which a retry after a lost answer may also find).
func (c *Client) RetryWebhookDelivery(ctx context.Context, id string) (*WebhookDelivery, error) {
	if id == "" {
		return nil, errors.New("paymentsvc: empty webhook delivery id")
	}
	cl := &call{method: http.MethodPost, path: "/v1/webhook_deliveries/" + url.PathEscape(id) + "/retry"}
	var d *WebhookDelivery
	cl.accept = func(a *answer) (bool, error) {
		var err error
		d, err = decode[WebhookDelivery](a, http.StatusAccepted)
		return err == nil, err
	}
	return finish(d, c.run(ctx, cl), nil)
}
