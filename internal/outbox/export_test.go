package outbox

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// What the relay tests (package outbox_test, which seed through
// internal/testdb and so cannot be in this package) need of its insides.

// Hooks are test signals on a relay; nil ones do nothing.
type Hooks struct {
	BeforePublish func(eventID string)  // a row is about to be sent
	AfterPublish  func()                // the batch's PubAcks are in, nothing is marked yet
	AfterBatch    func(res BatchResult) // the batch is committed
}

// BatchResult is what one committed batch did.
type BatchResult struct {
	Published, Duplicates int
}

// WithHooks returns c with h installed.
func (c Config) WithHooks(h Hooks) Config {
	c.hooks = hooks{beforePublish: h.BeforePublish, afterPublish: h.AfterPublish}
	if h.AfterBatch != nil {
		c.hooks.afterBatch = func(r batchResult) { h.AfterBatch(BatchResult{Published: r.published, Duplicates: r.duplicates}) }
	}
	return c
}

// Envelope is the CloudEvents envelope the relay publishes.
type Envelope = envelope

// EnsureStream is what the relay does to the stream PAYMENTS on payments.>
// with the default configuration; see ensureStream.
func EnsureStream(ctx context.Context, js jetstream.JetStream) error {
	return ensureStream(ctx, js, DefaultStream, []string{DefaultStreamSubjects}, Config{}.subjects(), DefaultStreamReplicas)
}

// EnsureStreamNamed is EnsureStream for a stream name, its subjects and the
// subject the relay publishes to.
var EnsureStreamNamed = ensureStream

// ListenRetryMax caps the wait between LISTEN reconnects.
const ListenRetryMax = listenRetryMax
