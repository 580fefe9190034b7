package providersim

import (
	"encoding/json"
	"fmt"
)

// Charge and refund statuses. A charge made with "capture":false is
// authorized until it is captured (succeeded), voided or expired.
const (
	StatusSucceeded  = "succeeded"
	StatusFailed     = "failed"
	StatusAuthorized = "authorized"
	StatusVoided     = "voided"
	StatusExpired    = "expired"
	// StatusRequiresConfirmation is a PaymentIntent of the Stripe face
	// created without confirm=true: nothing happened yet.
	StatusRequiresConfirmation = "requires_confirmation"
)

// Webhook event types.
const (
	EventChargeSucceeded  = "charge.succeeded"
	EventChargeFailed     = "charge.failed"
	EventChargeRefunded   = "charge.refunded"
	EventRefundSucceeded  = "refund.succeeded"
	EventChargeAuthorized = "charge.authorized"
	EventChargeCaptured   = "charge.captured"
	EventChargeVoided     = "charge.voided"
	EventChargeExpired    = "charge.expired"
)

// Charge is one charge the provider recorded: succeeded or failed, or for
// a charge made with "capture":false authorized, then captured (succeeded),
// voided or expired.
type Charge struct {
	ID             string `json:"id"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Status         string `json:"status"`
	Reference      string `json:"reference"`
	IdempotencyKey string `json:"idempotency_key"`
	PaymentMethod  string `json:"payment_method"`
	Created        int64  `json:"created"`
	// Captured is true once money moved: a succeeded automatic charge, or
	// a captured one. AmountCaptured is what moved.
	Captured       bool  `json:"captured"`
	AmountCaptured int64 `json:"amount_captured"`
	// AmountCapturable is the held amount while authorized, else 0.
	AmountCapturable int64 `json:"amount_capturable"`
	// CaptureBefore (unix seconds) is the deadline of a charge made with
	// "capture":false; 0 for a charge captured at once.
	CaptureBefore int64 `json:"capture_before,omitempty"`
	// CaptureKey and VoidKey are the idempotency keys that captured or
	// voided the charge.
	CaptureKey *string `json:"capture_key"`
	VoidKey    *string `json:"void_key"`
	// AmountRefunded is the sum of the charge's refunds, in minor units.
	AmountRefunded int64 `json:"amount_refunded"`
	// Refunded is true once AmountRefunded reaches AmountCaptured.
	Refunded    bool   `json:"refunded"`
	FailureCode string `json:"failure_code,omitempty"`
	// The Stripe face's fields (SIM_API=stripe): the PaymentIntent's
	// metadata, capture_method as sent, the cancellation_reason of a void,
	// and a decline's Stripe error code (FailureCode is its decline_code).
	Metadata           Metadata `json:"metadata,omitzero"`
	CaptureMethod      string   `json:"capture_method,omitempty"`
	CancellationReason string   `json:"cancellation_reason,omitempty"`
	DeclineErrorCode   string   `json:"decline_error_code,omitempty"`
}

// manual reports whether the charge was made with "capture":false.
func (c *Charge) manual() bool { return c.CaptureBefore != 0 }

// refundable is what is left to refund of a succeeded charge: of what it
// captured.
func (c *Charge) refundable() int64 { return c.AmountCaptured - c.AmountRefunded }

// normalizeRefunds makes the captured and refunded amounts agree for a
// charge that did not come from a call here: one imported with POST
// /_sim/charges, or read from a state file written before partial refunds
// (whose "refunded":true with no amount_refunded meant the whole amount) or
// captures (a succeeded automatic charge captured its amount) existed. It
// refuses a charge whose fields contradict each other.
func (c *Charge) normalizeRefunds() error {
	if c.Status == StatusSucceeded && !c.manual() && c.AmountCaptured == 0 {
		c.AmountCaptured = c.Amount
	}
	c.Captured = c.Status == StatusSucceeded && c.AmountCaptured > 0
	if c.Refunded && c.AmountRefunded == 0 {
		c.AmountRefunded = c.AmountCaptured
	}
	switch {
	case c.AmountCaptured < 0 || c.AmountCaptured > c.Amount:
		return fmt.Errorf("charge %s: amount_captured %d is not between 0 and its amount %d", c.ID, c.AmountCaptured, c.Amount)
	case c.AmountRefunded < 0 || c.AmountRefunded > c.AmountCaptured:
		return fmt.Errorf("charge %s: amount_refunded %d is not between 0 and its amount_captured %d", c.ID, c.AmountRefunded, c.AmountCaptured)
	case c.AmountRefunded > 0 && c.Status != StatusSucceeded:
		return fmt.Errorf("charge %s: only a succeeded charge can have refunds", c.ID)
	case c.Refunded && c.AmountRefunded != c.AmountCaptured:
		return fmt.Errorf("charge %s: refunded is true but amount_refunded %d is less than its amount_captured %d", c.ID, c.AmountRefunded, c.AmountCaptured)
	}
	if c.AmountRefunded > 0 {
		c.Refunded = c.AmountRefunded == c.AmountCaptured
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
	// The Stripe face's fields: the Refund's metadata and reason.
	Metadata Metadata `json:"metadata,omitzero"`
	Reason   string   `json:"reason,omitempty"`
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

// Faults is the set of misbehaviours applied to charge calls, to refund
// calls too when Refunds is set, and to capture and void calls too when
// Captures is set; lookups are never faulted.
type Faults struct {
	LatencyMS       int     `json:"latency_ms"`
	ErrorRate       float64 `json:"error_rate"`
	ErrorStatus     int     `json:"error_status"`
	DropAfterCommit bool    `json:"drop_after_commit"`
	Refunds         bool    `json:"refunds"`
	Captures        bool    `json:"captures"`
}

// Stats counts what the simulator has done since its state was created.
type Stats struct {
	ChargeCalls  int64 `json:"charge_calls"`
	Charges      int64 `json:"charges"`
	RefundCalls  int64 `json:"refund_calls"`
	Refunds      int64 `json:"refunds"`
	CaptureCalls int64 `json:"capture_calls"`
	VoidCalls    int64 `json:"void_calls"`
	WebhooksSent int64 `json:"webhooks_sent"`
}

// Metadata is a Stripe object's metadata (the Stripe face's): a JSON
// object of strings, kept encoded so that Charge and Refund stay
// comparable values.
type Metadata struct{ raw string }

// NewMetadata encodes m (nil or empty: no metadata).
func NewMetadata(m map[string]string) Metadata {
	if len(m) == 0 {
		return Metadata{}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // a map of strings always encodes
	}
	return Metadata{raw: string(b)}
}

// Map decodes the metadata (an empty map when there is none).
func (m Metadata) Map() map[string]string {
	out := map[string]string{}
	if m.raw != "" {
		_ = json.Unmarshal([]byte(m.raw), &out) // only NewMetadata and UnmarshalJSON set raw
	}
	return out
}

// IsZero reports that there is no metadata (for omitempty).
func (m Metadata) IsZero() bool { return m.raw == "" }

// MarshalJSON writes the object, or null when there is none.
func (m Metadata) MarshalJSON() ([]byte, error) {
	if m.raw == "" {
		return []byte("null"), nil
	}
	return []byte(m.raw), nil
}

// UnmarshalJSON reads an object of strings, or null.
func (m *Metadata) UnmarshalJSON(b []byte) error {
	var v map[string]string
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	*m = NewMetadata(v)
	return nil
}
