package attempts

import (
	"context"
	"encoding/json"

	"github.com/acme/paymentsvc/internal/db"
)

// Anomaly is a report that contradicts what we know, kept for settlement and humans.
type Anomaly struct {
	Kind      string // e.g. conflicting_report, unknown_charge, amount_mismatch
	AttemptID string
	ChargeID  string
	Source    Source
	Detail    any
	DedupeKey string // the same key records the anomaly once
}

// RecordAnomaly writes a in the caller's transaction (once per DedupeKey).
func RecordAnomaly(ctx context.Context, tx db.DBTX, a Anomaly) error {
	detail, err := json.Marshal(a.Detail)
	if err != nil {
		return err
	}
	if a.Detail == nil {
		detail = []byte("{}")
	}
	return db.Q.AnomalyInsert(ctx, tx, db.AnomalyInsertParams{
		Kind: a.Kind, AttemptID: nonEmpty(a.AttemptID), ChargeID: nonEmpty(a.ChargeID),
		Source: string(a.Source), Detail: detail, DedupeKey: nonEmpty(a.DedupeKey),
	})
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
