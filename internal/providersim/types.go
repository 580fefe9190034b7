package providersim

import (
	"encoding/json"
	"fmt"
)

// Charge and refund statuses.
const (
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// Webhook event types.
const (
	EventChargeSucceeded = "charge.succeeded"
	EventChargeFailed    = "charge.failed"
	EventChargeRefunded  = "charge.refunded"
	EventRefundSucceeded = "refund.succeeded"
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
	// AmountRefunded is the sum of the charge's refunds, in minor units.
	AmountRefunded int64 `json:"amount_refunded"`
	// Refunded is true once AmountRefunded reaches Amount.
	Refunded    bool   `json:"refunded"`
	FailureCode string `json:"failure_code,omitempty"`
}

// refundable is what is left to refund of a succeeded charge.
func (c *Charge) refundable() int64 { return c.Amount - c.AmountRefunded }

// normalizeRefunds makes AmountRefunded and Refunded agree for a charge that
// did not come from a refund here: one imported with POST /_sim/charges, or
// read from a state file written before partial refunds existed, whose
// "refunded":true (with no amount_refunded) meant the whole amount. It
// refuses a charge whose fields contradict each other.
func (c *Charge) normalizeRefunds() error {
	if c.Refunded && c.AmountRefunded == 0 {
		c.AmountRefunded = c.Amount
	}
	switch {
	case c.AmountRefunded < 0 || c.AmountRefunded > c.Amount:
		return fmt.Errorf("charge %s: amount_refunded %d is not between 0 and its amount %d", c.ID, c.AmountRefunded, c.Amount)
	case c.AmountRefunded > 0 && c.Status != StatusSucceeded:
		return fmt.Errorf("charge %s: only a succeeded charge can have refunds", c.ID)
	case c.Refunded && c.AmountRefunded != c.Amount:
		return fmt.Errorf("charge %s: refunded is true but amount_refunded %d is less than its amount %d", c.ID, c.AmountRefunded, c.Amount)
	}
	if c.AmountRefunded > 0 {
		c.Refunded = c.AmountRefunded == c.Amount
	}
	return nil
}

// Refund gives back part or all of a succeeded charge.
type Refund struct {
	ID             string `json:"id"`
	Charge         string `json:"charge"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Status         string `json:"status"`
	Reference      string `json:"reference"`
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

// EventData carries what an Event is about, as it was when the event was
// made: the charge for charge.* events, the refund for refund.* events.
type EventData struct {
	Charge Charge  `json:"charge"`
	Refund *Refund `json:"refund,omitempty"`
}

// MarshalJSON writes {"charge":…} for a charge event and {"refund":…} for a
// refund event, never an empty charge next to a refund.
func (d EventData) MarshalJSON() ([]byte, error) {
	out := struct {
		Charge *Charge `json:"charge,omitempty"`
		Refund *Refund `json:"refund,omitempty"`
	}{Refund: d.Refund}
	if d.Refund == nil || d.Charge.ID != "" {
		out.Charge = &d.Charge
	}
	return json.Marshal(out)
}

// Faults is the set of misbehaviours applied to charge calls, and to refund
// calls too when Refunds is set; lookups are never faulted.
type Faults struct {
	LatencyMS       int     `json:"latency_ms"`
	ErrorRate       float64 `json:"error_rate"`
	ErrorStatus     int     `json:"error_status"`
	DropAfterCommit bool    `json:"drop_after_commit"`
	Refunds         bool    `json:"refunds"`
}

// Stats counts what the simulator has done since its state was created.
type Stats struct {
	ChargeCalls  int64 `json:"charge_calls"`
	Charges      int64 `json:"charges"`
	RefundCalls  int64 `json:"refund_calls"`
	Refunds      int64 `json:"refunds"`
	WebhooksSent int64 `json:"webhooks_sent"`
}
