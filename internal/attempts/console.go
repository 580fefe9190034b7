package attempts

import (
	"context"
	"strings"
	"time"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/lifecycle"
)

// The console's reads of payments (internal/console): counts, the search
// across tenants, and a payment's audit trail as a timeline.

// CountCreatedSince counts the payments created within d, per status
// (statuses without payments are absent).
func CountCreatedSince(ctx context.Context, q db.DBTX, d time.Duration) (map[Status]int64, error) {
	rows, err := db.Q.AttemptCountByStatusSince(ctx, q, d.Milliseconds())
	if err != nil {
		return nil, translate(err)
	}
	out := make(map[Status]int64, len(rows))
	for _, r := range rows {
		out[Status(r.Status)] = r.N
	}
	return out, nil
}

// HourCount is how many payments created in one hour (UTC) are in Status now.
type HourCount struct {
	Hour   time.Time
	Status Status
	N      int64
}

// HourlyCreatedSince counts the payments created within d per hour of
// creation and status, oldest hour first (hours without payments are absent).
func HourlyCreatedSince(ctx context.Context, q db.DBTX, d time.Duration) ([]HourCount, error) {
	rows, err := db.Q.AttemptHourlyByStatus(ctx, q, d.Milliseconds())
	if err != nil {
		return nil, translate(err)
	}
	out := make([]HourCount, len(rows))
	for i, r := range rows {
		out[i] = HourCount{Hour: r.Hour.UTC(), Status: Status(r.Status), N: r.N}
	}
	return out, nil
}

// Search asks for a page of every tenant's payments, newest first: only
// those in Status, of TenantID, or whose id, order id or provider charge id
// is Q exactly, when set; after Before (found with Get) when set.
type Search struct {
	Status   Status
	TenantID string
	Q        string
	Before   *Attempt
	Limit    int
}

// Find returns one page of the search and whether more follow.
func Find(ctx context.Context, q db.DBTX, s Search) ([]Attempt, bool, error) {
	p := db.AttemptSearchPageParams{MaxRows: int32(s.Limit + 1)}
	p.Status, p.TenantID, p.Q = nonEmpty(string(s.Status)), nonEmpty(s.TenantID), nonEmpty(s.Q)
	if s.Before != nil {
		p.HasCursor, p.BeforeCreatedAt, p.BeforeID = true, s.Before.CreatedAt, s.Before.ID
	}
	rows, err := db.Q.AttemptSearchPage(ctx, q, p)
	if err != nil {
		return nil, false, translate(err)
	}
	more := len(rows) > s.Limit
	if more {
		rows = rows[:s.Limit]
	}
	out := make([]Attempt, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, more, nil
}

// Timeline returns the payment's audit rows, oldest first, the creation
// included. Each names the provider the payment was at after it: the rows
// do not store it, but every move to PENDING names the provider about to be
// called (lifecycle.ReasonCalling) and a call not sent (back to CREATED)
// leaves the payment at none, so the hops read straight off the trail.
func Timeline(ctx context.Context, q db.DBTX, id string) ([]lifecycle.Audit, error) {
	rows, err := db.Q.AttemptEventList(ctx, q, id)
	if err != nil {
		return nil, translate(err)
	}
	out := make([]lifecycle.Audit, len(rows))
	at := ""
	for i, r := range rows {
		to := Status(r.ToStatus)
		switch {
		case to == Pending && strings.HasPrefix(r.Reason, lifecycle.ReasonCalling):
			at, _, _ = strings.Cut(strings.TrimPrefix(r.Reason, lifecycle.ReasonCalling), " ")
			at = strings.TrimSuffix(at, ";")
		case to == Created:
			at = ""
		}
		a := lifecycle.Audit{SubjectID: r.AttemptID, To: to, Source: Source(r.Source), Reason: r.Reason, Provider: at, At: r.CreatedAt}
		if r.FromStatus != nil {
			a.From = Status(*r.FromStatus)
		}
		out[i] = a
	}
	return out, nil
}

// NeedsReview counts the unresolved payments the reconciler flagged for a
// human (the backlog's, so it costs the backlog).
func NeedsReview(ctx context.Context, q db.DBTX) (int64, error) {
	rows, err := Unresolved(ctx, q)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, r := range rows {
		n += r.NeedsReview
	}
	return n, nil
}

// Stuck returns up to limit of the oldest unresolved payments that have not
// moved for quiet (a payment in flight moves within its retry budget).
func Stuck(ctx context.Context, q db.DBTX, quiet time.Duration, limit int) ([]Attempt, error) {
	rows, err := db.Q.AttemptListStuck(ctx, q, db.AttemptListStuckParams{QuietMs: quiet.Milliseconds(), MaxRows: int32(limit)})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]Attempt, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}
