package providersim

// Charge statuses.
const (
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// Webhook event types.
const (
	EventChargeSucceeded = "charge.succeeded"
	EventChargeFailed    = "charge.failed"
	EventChargeRefunded  = "charge.refunded"
)

// Charge is one charge the provider recorded, succeeded or failed.
type Charge struct {
	ID             string `json:"id"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Status         string `json:"status"`
	Reference      string `json:"reference"`
	IdempotencyKey string `json:"idempotency_key"`
	PaymentMethod  string `json:"payment_method"`
	Created        int64  `json:"created"`
	Refunded       bool   `json:"refunded"`
	FailureCode    string `json:"failure_code,omitempty"`
}

// Refund gives back the whole amount of a succeeded charge.
type Refund struct {
	ID             string `json:"id"`
	Charge         string `json:"charge"`
	Amount         int64  `json:"amount"`
	Status         string `json:"status"`
	IdempotencyKey string `json:"idempotency_key"`
	Created        int64  `json:"created"`
}

// Event is the body of one webhook delivery.
type Event struct {
	ID      string    `json:"id"`
	Type    string    `json:"type"`
	Created int64     `json:"created"`
	Data    EventData `json:"data"`
}

// EventData carries the charge an Event is about, as it was when the event was made.
type EventData struct {
	Charge Charge `json:"charge"`
}

// Faults is the set of misbehaviours applied to charge calls (never to lookups or refunds).
type Faults struct {
	LatencyMS       int     `json:"latency_ms"`
	ErrorRate       float64 `json:"error_rate"`
	ErrorStatus     int     `json:"error_status"`
	DropAfterCommit bool    `json:"drop_after_commit"`
}

// Stats counts what the simulator has done since its state was created.
type Stats struct {
	ChargeCalls  int64 `json:"charge_calls"`
	Charges      int64 `json:"charges"`
	Refunds      int64 `json:"refunds"`
	WebhooksSent int64 `json:"webhooks_sent"`
}
