package delivery_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/delivery"
	"github.com/acme/paymentsvc/internal/outbox"
)

// TestRetriesUntilDelivered: an endpoint answers 500, 500, then 200. The
// delivery is delivered on the third attempt, each attempt carrying the same
// webhook-id (the event id), its own timestamp and a signature the official
// library verifies, and each attempt has its audit row.
func TestRetriesUntilDelivered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, func(n int) int {
		if n < 3 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	ep := b.endpoint(rc.URL + "/hooks")
	ids := b.publishN(1)
	b.deliver(fastConfig())

	got := b.waitStatus(ep.ID, 1, delivery.StatusDelivered, 30*time.Second)[0]
	require.Equal(t, 3, got.Attempts)
	require.Equal(t, ids[0], got.EventID)
	require.Equal(t, delivery.EventPaymentSucceeded, got.EventType)
	require.NotNil(t, got.LastStatusCode)
	require.Equal(t, 200, *got.LastStatusCode)
	require.Nil(t, got.LastError, "a delivered delivery's last attempt had no error")
	require.Nil(t, got.NextAttemptAt)
	require.NotNil(t, got.DeliveredAt)

	reqs := rc.requests()
	require.Len(t, reqs, 3)
	for _, r := range reqs {
		require.Equal(t, ids[0], r.header.Get("webhook-id"), "the same webhook-id on every attempt")
		require.Equal(t, "application/json", r.header.Get("Content-Type"))
		ev := requireVerified(t, ep.Secret, r)
		require.Equal(t, ids[0], ev["id"])
		require.Equal(t, "payment.succeeded", ev["type"])
		require.Equal(t, b.tenant, ev["data"].(map[string]any)["tenant_id"])
		_, err := time.Parse(time.RFC3339, ev["created_at"].(string))
		require.NoError(t, err)
	}
	require.Equal(t, string(reqs[0].body), string(reqs[2].body), "the same body on every attempt")
	require.Equal(t, 3, b.count(`SELECT count(*) FROM webhook_delivery_events WHERE delivery_id = $1 AND source = 'worker'`, got.ID))
	require.Equal(t, 2, b.count(`SELECT count(*) FROM webhook_delivery_events WHERE delivery_id = $1 AND reason = 'attempt_failed' AND status_code = 500 AND to_status = 'pending'`, got.ID))
	require.Equal(t, 1, b.count(`SELECT count(*) FROM webhook_delivery_events WHERE delivery_id = $1 AND reason = 'delivered' AND from_status = 'pending' AND to_status = 'delivered' AND attempt = 3`, got.ID))
}

// TestExhaustedThenManualRetry: an endpoint that always answers 500 gets
// the first attempt and one per delay of the schedule, then the delivery
// is failed with the answer's status and an excerpt of its body. A manual
// retry makes it try again now, with a fresh schedule and its attempts
// counting on; once delivered, a retry is refused with 409.
func TestExhaustedThenManualRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var healthy atomic.Bool
	rc := newReceiver(t, func(int) int {
		if healthy.Load() {
			return http.StatusNoContent
		}
		return http.StatusInternalServerError
	})
	ep := b.endpoint(rc.URL)
	b.publishN(1)
	cfg := fastConfig()
	cfg.Schedule = []time.Duration{50 * time.Millisecond, 50 * time.Millisecond}
	b.deliver(cfg)

	failed := b.waitStatus(ep.ID, 1, delivery.StatusFailed, 30*time.Second)[0]
	require.Equal(t, 3, failed.Attempts, "the first attempt and one per delay")
	require.Equal(t, 500, *failed.LastStatusCode)
	require.Equal(t, `HTTP 500: {"received":true}`, *failed.LastError)
	require.Nil(t, failed.NextAttemptAt)
	require.Len(t, rc.requests(), 3)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM webhook_delivery_events WHERE delivery_id = $1 AND reason = 'retries_exhausted' AND to_status = 'failed'`, failed.ID))

	healthy.Store(true)
	retried, err := b.endpoints.Retry(context.Background(), b.tenant, failed.ID)
	require.NoError(t, err)
	require.Equal(t, delivery.StatusPending, retried.Status)
	require.NotNil(t, retried.NextAttemptAt)
	delivered := b.waitStatus(ep.ID, 1, delivery.StatusDelivered, 30*time.Second)[0]
	require.Equal(t, 4, delivered.Attempts, "a manual retry does not reset attempts")
	require.Equal(t, 204, *delivered.LastStatusCode)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM webhook_delivery_events WHERE delivery_id = $1 AND source = 'api' AND reason = 'retry_requested' AND from_status = 'failed'`, failed.ID))

	_, err = b.endpoints.Retry(context.Background(), b.tenant, failed.ID)
	requireCode(t, err, apperr.WebhookDeliveryDelivered)
	_, err = b.endpoints.Retry(context.Background(), "ten_other", failed.ID)
	requireCode(t, err, apperr.WebhookDeliveryNotFound)
	_, err = b.endpoints.Retry(context.Background(), b.tenant, "whd_none")
	requireCode(t, err, apperr.WebhookDeliveryNotFound)
}

// TestEventTypeFilterAndAge: each endpoint gets the events of the types it
// subscribes to (all without event_types), of its own tenant, and only
// those created after it existed.
func TestEventTypeFilterAndAge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.now().Add(-time.Second)
	rc := newReceiver(t, nil)
	all := b.endpoint(rc.URL + "/all")
	failedOnly := b.endpoint(rc.URL+"/failed", delivery.EventPaymentFailed, delivery.EventRefundFailed)
	other := b.endpointOf(b.otherTenant(), rc.URL+"/other")
	ids := b.publish(
		event{typ: outbox.TypePaymentSucceeded},
		event{typ: outbox.TypePaymentFailed},
		event{typ: outbox.TypePaymentRefunded},
		event{typ: outbox.TypePaymentRefundFailed},
		event{typ: outbox.TypePaymentFailed, createdAt: before}, // older than the endpoints
		event{typ: "SomethingElse"},                             // not a merchant event
	)
	b.deliver(fastConfig())

	types := func(list []delivery.Delivery) map[string]string {
		out := map[string]string{}
		for _, d := range list {
			out[d.EventID] = d.EventType
		}
		return out
	}
	require.Equal(t, map[string]string{
		ids[0]: delivery.EventPaymentSucceeded, ids[1]: delivery.EventPaymentFailed,
		ids[2]: delivery.EventRefundSucceeded, ids[3]: delivery.EventRefundFailed,
	}, types(b.waitStatus(all.ID, 4, delivery.StatusDelivered, 30*time.Second)))
	require.Equal(t, map[string]string{ids[1]: delivery.EventPaymentFailed, ids[3]: delivery.EventRefundFailed},
		types(b.waitStatus(failedOnly.ID, 2, delivery.StatusDelivered, 30*time.Second)))
	require.Zero(t, b.count(`SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1`, other.ID), "another tenant's endpoint")
	require.Zero(t, b.count(`SELECT count(*) FROM webhook_deliveries WHERE event_id = $1 OR event_id = $2`, ids[4], ids[5]))
	require.Len(t, rc.requests(), 6, "4 deliveries to one endpoint, 2 to the other")

	// The fan-out of an event already fanned out (a relay publishing it
	// again after a crash) adds nothing.
	b.republish(ids[0], ids[1])
	require.Equal(t, 3, b.count(`SELECT count(*) FROM webhook_deliveries WHERE event_id = $1 OR event_id = $2`, ids[0], ids[1]))
	require.Equal(t, 6, b.count(`SELECT count(*) FROM webhook_deliveries`))
}

// TestRotationSignsWithBoth: after a rotation, deliveries carry two
// signatures, the new secret's first, and each verifies on its own; the
// endpoint as read never shows a secret.
func TestRotationSignsWithBoth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	ep := b.endpoint(rc.URL)
	rotated, err := b.endpoints.RotateSecret(context.Background(), b.tenant, ep.ID)
	require.NoError(t, err)
	require.NotEqual(t, ep.Secret, rotated.Secret)
	require.Equal(t, ep.ID, rotated.ID)
	b.publishN(1)
	b.deliver(fastConfig())
	b.waitStatus(ep.ID, 1, delivery.StatusDelivered, 30*time.Second)

	r := rc.requests()[0]
	sigs := strings.Split(r.header.Get("webhook-signature"), " ")
	require.Len(t, sigs, 2, "two signatures during the rotation")
	for _, s := range sigs {
		require.True(t, strings.HasPrefix(s, "v1,"), s)
	}
	requireVerified(t, rotated.Secret, r)
	requireVerified(t, ep.Secret, r)
	_, err = strconv.ParseInt(r.header.Get("webhook-timestamp"), 10, 64)
	require.NoError(t, err)

	got, err := b.endpoints.Get(context.Background(), b.tenant, ep.ID)
	require.NoError(t, err)
	require.Equal(t, ep.URL, got.URL)
}

// TestDeletedEndpointGetsNothingMore: deleting an endpoint fails its
// pending deliveries, and nothing is claimed for it afterwards.
func TestDeletedEndpointGetsNothingMore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	ep := b.endpoint(rc.URL)
	b.publishN(3)
	require.NoError(t, b.endpoints.Delete(context.Background(), b.tenant, ep.ID))
	requireCode(t, b.endpoints.Delete(context.Background(), b.tenant, ep.ID), apperr.WebhookEndpointNotFound)
	b.publishN(2) // after the delete: no deliveries at all
	require.Equal(t, 3, b.count(`SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'failed' AND last_error = 'endpoint deleted'`, ep.ID))
	require.Equal(t, 3, b.count(`SELECT count(*) FROM webhook_delivery_events WHERE reason = 'endpoint_deleted'`))
	require.Zero(t, b.count(`SELECT count(*) FROM webhook_endpoints WHERE id = $1 AND (secret IS NOT NULL OR previous_secret IS NOT NULL)`, ep.ID))
	_, err := b.endpoints.Get(context.Background(), b.tenant, ep.ID)
	requireCode(t, err, apperr.WebhookEndpointNotFound)

	other := b.endpoint(rc.URL + "/other")
	b.publishN(1)
	b.deliver(fastConfig())
	b.waitStatus(other.ID, 1, delivery.StatusDelivered, 30*time.Second)
	require.Len(t, rc.requests(), 1, "only the live endpoint's delivery")
}

func requireCode(t *testing.T, err error, code apperr.Code) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, apperr.As(err).Code, "%v", err)
}
