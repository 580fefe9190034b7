package outbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/acme/paymentsvc/internal/db"
)

// DefaultNotifyInterval is the least time between two NOTIFYs that Notify
// sends.
const DefaultNotifyInterval = 10 * time.Millisecond

// Wakeup carries "a transaction of this process committed outbox rows" to
// the process's own relay (Config.Wakeup) without a NOTIFY. A NOTIFY is
// delivered at commit under one cluster-wide lock, held through the commit,
// so notifying commits are serialised: none of them can share a WAL flush
// with another. The create path commits once per payment, hundreds of times
// a second, so it sends none (db/queries/outbox.sql, OutboxInsertMoved) and
// signals its Wakeup after the commit instead.
//
// The relay of the pod that wrote the rows is woken at once; the relays of
// the other pods find them at their next poll (Config.PollInterval), or at
// once when the writing pod runs no relay and forwards its signals as
// debounced NOTIFYs (Notify). Rows are never lost either way: a signal is
// only a wake-up, the table is the queue.
type Wakeup chan struct{}

// NewWakeup returns a Wakeup that holds one pending signal.
func NewWakeup() Wakeup { return make(Wakeup, 1) }

// Signal wakes whatever waits on w, after the commit of a transaction that
// wrote outbox rows. It never blocks: one pending signal stands for any
// number. A nil Wakeup ignores it (a send on a nil channel is never ready).
func (w Wakeup) Signal() { db.Signal(w) }

// Notify sends NOTIFY outbox for w's signals, at most one per interval
// (DefaultNotifyInterval if 0), until ctx ends: for a process that writes
// outbox rows but runs no relay (OUTBOX_RELAY=off), so that the relays of
// other pods are woken by one NOTIFY per interval instead of one per
// commit. A NOTIFY that fails is logged; the relays' poll finds the rows.
func Notify(ctx context.Context, pool *db.Pool, w Wakeup, interval time.Duration, log *slog.Logger) {
	if interval <= 0 {
		interval = DefaultNotifyInterval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-w:
		}
		if err := db.Q.OutboxNotify(ctx, pool); err != nil && ctx.Err() == nil {
			log.Warn("notify outbox failed; the relays' poll will find the rows", "component", "outbox_notify", "err", err)
		}
		if !sleep(ctx, interval) {
			return
		}
	}
}
