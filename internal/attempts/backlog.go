package attempts

import (
	"context"

	"github.com/acme/paymentsvc/internal/db"
)

// Backlog is the unresolved attempts in one status.
type Backlog struct {
	Status        Status
	Unresolved    int64   // how many
	NeedsReview   int64   // how many the reconciler flagged for a human
	OldestSeconds float64 // age of the oldest, since creation
}

// Unresolved summarises the unresolved attempts per status (statuses with
// none are absent). It reads the partial index of unresolved attempts, so it
// costs the backlog, not the table: cheap enough for every metrics scrape.
func Unresolved(ctx context.Context, q db.DBTX) ([]Backlog, error) {
	rows, err := db.Q.AttemptBacklogByStatus(ctx, q)
	if err != nil {
		return nil, translate(err)
	}
	out := make([]Backlog, len(rows))
	for i, r := range rows {
		out[i] = Backlog{Status: Status(r.Status), Unresolved: r.Unresolved, NeedsReview: r.NeedsReview, OldestSeconds: r.OldestSeconds}
	}
	return out, nil
}
