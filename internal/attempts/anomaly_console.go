package attempts

import (
	"context"
	"errors"
	"time"

	"github.com/acme/paymentsvc/internal/db"
)

// Recorded is a stored anomaly, open or resolved.
type Recorded struct {
	ID         int64
	Kind       string
	AttemptID  string // "" when it names no payment
	ChargeID   string
	Source     Source
	Detail     string // the JSON detail as stored
	CreatedAt  time.Time
	ResolvedAt *time.Time
	ResolvedBy string
	Note       string
}

// ErrAnomalyNotFound is an anomaly id that names none.
var ErrAnomalyNotFound = errors.New("anomaly not found")

// OpenAnomalies returns up to limit open anomalies, newest first.
func OpenAnomalies(ctx context.Context, q db.DBTX, limit int) ([]Recorded, error) {
	rows, err := db.Q.AnomalyListOpen(ctx, q, int32(limit))
	return recorded(rows, err)
}

// ResolvedAnomalies returns up to limit resolved anomalies, the last resolved first.
func ResolvedAnomalies(ctx context.Context, q db.DBTX, limit int) ([]Recorded, error) {
	rows, err := db.Q.AnomalyListResolved(ctx, q, int32(limit))
	return recorded(rows, err)
}

// AnomaliesOf returns every anomaly that names payment id, oldest first.
func AnomaliesOf(ctx context.Context, q db.DBTX, id string) ([]Recorded, error) {
	rows, err := db.Q.AnomalyListForAttempt(ctx, q, &id)
	return recorded(rows, err)
}

// CountOpenAnomalies counts the anomalies nobody resolved yet.
func CountOpenAnomalies(ctx context.Context, q db.DBTX) (int64, error) {
	n, err := db.Q.AnomalyCountOpen(ctx, q)
	return n, translate(err)
}

// ResolveAnomaly resolves open anomaly id, recording by whom and the note.
// It reports false, with the anomaly as it is, when it was resolved already
// (so a form sent twice resolves it once); ErrAnomalyNotFound if none.
func ResolveAnomaly(ctx context.Context, q db.DBTX, id int64, by, note string) (Recorded, bool, error) {
	row, err := db.Q.AnomalyResolve(ctx, q, db.AnomalyResolveParams{ID: id, ResolvedBy: &by, Note: &note})
	if err == nil {
		return toRecorded(row), true, nil
	}
	if err = translate(err); !errors.Is(err, ErrNotFound) {
		return Recorded{}, false, err
	}
	row, err = db.Q.AnomalyGetByID(ctx, q, id)
	if err = translate(err); errors.Is(err, ErrNotFound) {
		return Recorded{}, false, ErrAnomalyNotFound
	} else if err != nil {
		return Recorded{}, false, err
	}
	return toRecorded(row), false, nil
}

func recorded(rows []db.Anomaly, err error) ([]Recorded, error) {
	if err != nil {
		return nil, translate(err)
	}
	out := make([]Recorded, len(rows))
	for i, r := range rows {
		out[i] = toRecorded(r)
	}
	return out, nil
}

func toRecorded(r db.Anomaly) Recorded {
	return Recorded{
		ID: r.ID, Kind: r.Kind, AttemptID: deref(r.AttemptID), ChargeID: deref(r.ChargeID), Source: Source(r.Source),
		Detail: string(r.Detail), CreatedAt: r.CreatedAt, ResolvedAt: r.ResolvedAt,
		ResolvedBy: deref(r.ResolvedBy), Note: deref(r.ResolutionNote),
	}
}
