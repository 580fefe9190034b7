package client

import "time"

// WebhookEventType is the type of an event pushed to a webhook endpoint.
type WebhookEventType string

// The event types an endpoint may subscribe to.
const (
	EventPaymentSucceeded  WebhookEventType = "payment.succeeded"
	EventPaymentFailed     WebhookEventType = "payment.failed"
	EventPaymentAuthorized WebhookEventType = "payment.authorized"
	EventPaymentCanceled   WebhookEventType = "payment.canceled"
	EventRefundSucceeded   WebhookEventType = "refund.succeeded"
	EventRefundFailed      WebhookEventType = "refund.failed"
)

// WebhookEndpointStatus is the state of a webhook endpoint.
type WebhookEndpointStatus string

// The statuses of an endpoint.
const (
	WebhookEndpointEnabled WebhookEndpointStatus = "enabled"
)

// CreateWebhookEndpointRequest is the body of POST /v1/webhook_endpoints.
type CreateWebhookEndpointRequest struct {
	URL         string             `json:"url"`                   // absolute https://
	EventTypes  []WebhookEventType `json:"event_types,omitempty"` // nil: every type
	Description string             `json:"description,omitempty"`
}

// WebhookEndpoint is an endpoint as reads show it: never its secret.
type WebhookEndpoint struct {
	ID          string                `json:"id"` // "we_…"
	URL         string                `json:"url"`
	EventTypes  *[]WebhookEventType   `json:"event_types"` // nil: every type
	Description *string               `json:"description"`
	Status      WebhookEndpointStatus `json:"status"`
	CreatedAt   time.Time             `json:"created_at"`
}

// WebhookEndpointWithSecret is the answer of a create or of a rotation:
// the endpoint and its signing secret ("whsec_…"), shown this once.
type WebhookEndpointWithSecret struct {
	ID          string                `json:"id"`
	URL         string                `json:"url"`
	EventTypes  *[]WebhookEventType   `json:"event_types"`
	Description *string               `json:"description"`
	Status      WebhookEndpointStatus `json:"status"`
	Secret      string                `json:"secret"`
	CreatedAt   time.Time             `json:"created_at"`
}

// WebhookEndpointList is one page of the tenant's endpoints, newest first.
type WebhookEndpointList struct {
	Data    []WebhookEndpoint `json:"data"`
	HasMore bool              `json:"has_more"`
}

// ListWebhookEndpointsParams page ListWebhookEndpoints.
type ListWebhookEndpointsParams struct {
	Limit         int    `query:"limit"`          // 1–100; 0 for the server's default (ListWebhookEndpoints uses 100)
	StartingAfter string `query:"starting_after"` // the ID of the last endpoint seen
}

// WebhookDeliveryStatus is the state of one event's delivery to one endpoint.
type WebhookDeliveryStatus string

// The statuses of a delivery.
const (
	WebhookDeliveryPending   WebhookDeliveryStatus = "pending"   // more attempts to come
	WebhookDeliveryDelivered WebhookDeliveryStatus = "delivered" // a 2xx
	WebhookDeliveryFailed    WebhookDeliveryStatus = "failed"    // the schedule is spent, or the address was refused
)

// WebhookDelivery is one event to one endpoint, and what its attempts got.
type WebhookDelivery struct {
	ID             string                `json:"id"` // "whd_…"
	EndpointID     string                `json:"endpoint_id"`
	EventID        string                `json:"event_id"` // also the webhook-id of every attempt
	EventType      WebhookEventType      `json:"event_type"`
	Status         WebhookDeliveryStatus `json:"status"`
	Attempts       int                   `json:"attempts"` // every attempt ever made
	LastStatusCode *int                  `json:"last_status_code"`
	LastError      *string               `json:"last_error"`
	NextAttemptAt  *time.Time            `json:"next_attempt_at"` // nil unless pending
	DeliveredAt    *time.Time            `json:"delivered_at"`
	CreatedAt      time.Time             `json:"created_at"`
}

// WebhookDeliveryList is one page of an endpoint's deliveries, newest first.
type WebhookDeliveryList struct {
	Data    []WebhookDelivery `json:"data"`
	HasMore bool              `json:"has_more"`
}

// ListWebhookDeliveriesParams page ListWebhookDeliveries.
type ListWebhookDeliveriesParams struct {
	Limit         int    `query:"limit"`
	StartingAfter string `query:"starting_after"`
}
