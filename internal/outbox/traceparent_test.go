package outbox

import (
	"encoding/json"
	"testing"
	"time"
)

const testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// The envelope carries the CloudEvents distributed-tracing extension
// traceparent when the row has one, and no such attribute otherwise.
func TestEnvelopeTraceparent(t *testing.T) {
	t.Parallel()
	ev := event{ID: "evt_1", Type: TypePaymentSucceeded, PaymentID: "pay_1", Payload: json.RawMessage(`{}`), CreatedAt: time.Now()}
	for _, tp := range []string{"", testTraceparent} {
		ev.Traceparent = tp
		raw, err := ev.marshal("paymentsvc")
		if err != nil {
			t.Fatal(err)
		}
		var attrs map[string]any
		if err := json.Unmarshal(raw, &attrs); err != nil {
			t.Fatal(err)
		}
		got, present := attrs["traceparent"]
		if tp == "" && present {
			t.Errorf("untraced event has traceparent %v: %s", got, raw)
		}
		if tp != "" && got != tp {
			t.Errorf("traceparent %v, want %s: %s", got, tp, raw)
		}
	}
}
