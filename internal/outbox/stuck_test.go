package outbox_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/testkit"
)

// TestRelayThatGoesSilentMidBatchDoesNotKeepItsRows freezes a relay after
// JetStream acknowledged its batch and before it marks the rows: to the
// database that is what a pod on a node that lost power or its network
// looks like, a session idle in its transaction that never speaks again (no
// FIN, no RST: the server's TCP keepalive would notice only after hours).
// The claim's row locks must not outlive the batch's own bound
// (BatchTimeout): another relay then publishes the rows, and since that is
// well inside the duplicate window JetStream drops every copy.
func TestRelayThatGoesSilentMidBatchDoesNotKeepItsRows(t *testing.T) {
	t.Parallel()
	b := setup(t, testkit.NATSURL())
	ids := b.insertEvents(t, 20)

	frozen := make(chan struct{})
	thaw := make(chan struct{})
	var once sync.Once
	cfgA := b.cfg
	cfgA.PublishTimeout = time.Second
	cfgA.BatchTimeout = 3 * time.Second
	cfgA = cfgA.WithHooks(outbox.Hooks{AfterPublish: func() {
		once.Do(func() {
			close(frozen)
			<-thaw
		})
	}})
	runRelay(t, newRelay(t, b.db.Pool, cfgA))
	t.Cleanup(func() { close(thaw) }) // runs before the relay's stop
	select {
	case <-frozen:
	case <-time.After(30 * time.Second):
		t.Fatal("relay A did not reach the freeze point")
	}
	counts, _ := streamEvents(t, b.js, b.cfg.Stream)
	require.Len(t, counts, 20, "events in the stream when relay A froze")

	var duplicates atomic.Int64
	cfgB := b.cfg.WithHooks(outbox.Hooks{AfterBatch: func(res outbox.BatchResult) { duplicates.Add(int64(res.Duplicates)) }})
	runRelay(t, newRelay(t, b.db.Pool, cfgB))
	waitDrained(t, b.db.Pool, cfgA.BatchTimeout+20*time.Second)

	requireEachOnce(t, b.js, b.cfg.Stream, ids)
	requireAllPublished(t, b.db.Pool, 20)
	require.EqualValues(t, 20, duplicates.Load(), "duplicates JetStream reported on relay B's republish")
}
