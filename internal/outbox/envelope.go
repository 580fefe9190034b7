package outbox

import (
	"encoding/json"
	"time"
)

// envelope is a CloudEvents 1.0 event in structured JSON mode. Traceparent
// is the distributed-tracing extension: the W3C traceparent of the request
// that produced the event, absent when it was not traced.
type envelope struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Time            string          `json:"time"`
	DataContentType string          `json:"datacontenttype"`
	Subject         string          `json:"subject"`
	Traceparent     string          `json:"traceparent,omitempty"`
	Data            json.RawMessage `json:"data"`
}

// event is an outbox row as the relay publishes it.
type event struct {
	ID        string
	Type      string
	PaymentID string
	Payload   json.RawMessage
	CreatedAt time.Time
	// Traceparent is the producing request's, or "".
	Traceparent string
}

// marshal returns the event's CloudEvents envelope. The outbox id is the
// CloudEvents id and the Nats-Msg-Id, so consumers and JetStream dedupe on
// the same value.
func (e event) marshal(source string) ([]byte, error) {
	return json.Marshal(envelope{
		SpecVersion:     "1.0",
		ID:              e.ID,
		Source:          source,
		Type:            e.Type,
		Time:            e.CreatedAt.UTC().Format(time.RFC3339Nano),
		DataContentType: "application/json",
		Subject:         e.PaymentID,
		Traceparent:     e.Traceparent,
		Data:            e.Payload,
	})
}
