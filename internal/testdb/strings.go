package testdb

import (
	"context"
	"testing"

	"github.com/acme/paymentsvc/internal/db"
)

// Strings runs query on q and returns its one text column, row by row, as
// T (ids, keys, statuses); nil when there is no row. It fails the test on
// error.
func Strings[T ~string](ctx context.Context, t testing.TB, q db.DBTX, query string, args ...any) []T {
	t.Helper()
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		t.Fatalf("testdb: %s: %v", query, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatalf("testdb: %s: %v", query, err)
		}
		out = append(out, T(s))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("testdb: %s: %v", query, err)
	}
	return out
}
