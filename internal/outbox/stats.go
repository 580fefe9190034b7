package outbox

import (
	"context"
	"time"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/metrics"
)

// Stats returns the number of unpublished outbox rows and the age of the
// oldest one (0 when none is pending).
func Stats(ctx context.Context, q db.DBTX) (pending int, oldest time.Duration, err error) {
	row, err := db.Q.OutboxStats(ctx, q)
	if err != nil {
		return 0, 0, err
	}
	return int(row.Pending), time.Duration(row.OldestSeconds * float64(time.Second)), nil
}

// refreshGauges updates the outbox gauges. Every relay sets the same values
// (they describe the table, not the pod), so any pod's scrape is right. The
// pool bounds the query (DATABASE_TIMEOUT).
func (r *Relay) refreshGauges(ctx context.Context) {
	pending, oldest, err := Stats(ctx, r.pool)
	if err != nil {
		if ctx.Err() == nil { // not just shutting down
			r.log.Warn("outbox stats", "err", err)
		}
		return
	}
	metrics.OutboxPending.Set(float64(pending))
	metrics.OutboxOldestAge.Set(oldest.Seconds())
}
