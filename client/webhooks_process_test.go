package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/client"
)

// The webhook endpoints' calls against a real pod: create (and its replay
// by key), read, list, rotate (sent once), deliveries, retry and delete,
// with the problems the calls document.
func TestProcessWebhookEndpoints(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pod := s.pod(t, "paymentsvc")
	c, rec := s.client(t, processConfig(), pod.URL())
	ctx := context.Background()

	req := client.CreateWebhookEndpointRequest{URL: "https://shop.example/hooks", EventTypes: []client.WebhookEventType{client.EventPaymentSucceeded}, Description: "orders"}
	key := client.NewKey()
	created, err := c.CreateWebhookEndpoint(ctx, key, req)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(created.Secret, "whsec_"))
	require.Equal(t, client.WebhookEndpointEnabled, created.Status)
	require.Equal(t, []client.WebhookEventType{client.EventPaymentSucceeded}, *created.EventTypes)
	replayed, err := c.CreateWebhookEndpoint(ctx, key, req)
	require.NoError(t, err)
	require.Equal(t, created, replayed, "the same key replays the same endpoint and secret")
	all, err := c.CreateWebhookEndpoint(ctx, "", client.CreateWebhookEndpointRequest{URL: "https://shop.example/all"})
	require.NoError(t, err)
	require.Nil(t, all.EventTypes, "every type")
	_, err = c.CreateWebhookEndpoint(ctx, "", client.CreateWebhookEndpointRequest{URL: "http://shop.example/"})
	var p *client.Problem
	require.ErrorAs(t, err, &p)
	require.Equal(t, client.CodeInvalidRequest, p.Code)

	got, err := c.GetWebhookEndpoint(ctx, created.ID)
	require.NoError(t, err)
	require.Equal(t, created.URL, got.URL)
	var ids []string
	for e, err := range c.ListWebhookEndpoints(ctx, client.ListWebhookEndpointsParams{Limit: 1}) {
		require.NoError(t, err)
		ids = append(ids, e.ID)
	}
	require.Equal(t, []string{all.ID, created.ID}, ids)

	tries := len(rec.tries())
	rotated, err := c.RotateWebhookEndpointSecret(ctx, created.ID)
	require.NoError(t, err)
	require.NotEqual(t, created.Secret, rotated.Secret)
	require.Len(t, rec.tries(), tries+1, "one try")

	for d, err := range c.ListWebhookDeliveries(ctx, created.ID, client.ListWebhookDeliveriesParams{}) {
		require.NoError(t, err)
		t.Fatalf("no event was made, yet delivery %s", d.ID)
	}
	_, err = c.RetryWebhookDelivery(ctx, "whd_none")
	require.ErrorAs(t, err, &p)
	require.Equal(t, client.CodeWebhookDeliveryNotFound, p.Code)

	require.NoError(t, c.DeleteWebhookEndpoint(ctx, created.ID))
	err = c.DeleteWebhookEndpoint(ctx, created.ID)
	require.ErrorAs(t, err, &p)
	require.Equal(t, client.CodeWebhookEndpointNotFound, p.Code)
	require.Equal(t, http.StatusNotFound, p.Status)
	_, err = c.GetWebhookEndpoint(ctx, created.ID)
	require.True(t, errors.As(err, &p) && p.Code == client.CodeWebhookEndpointNotFound, "%v", err)
}
