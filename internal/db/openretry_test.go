package db

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestRetryableOpen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("ping database: %w", fmt.Errorf("host a: %w", pgconn.ErrReadOnlyConnection)), true},
		{fmt.Errorf("ping database: %w", &pgconn.PgError{Code: "57P03"}), true},
		{fmt.Errorf("ping database: %w", &pgconn.PgError{Code: "57P01"}), true},
		{fmt.Errorf("ping database: %w", &pgconn.PgError{Code: "28P01"}), false},
		{fmt.Errorf("ping database: %w", &pgconn.PgError{Code: "3D000"}), false},
		{fmt.Errorf("ping database: dial tcp: connection refused"), false},
	} {
		if got := retryableOpen(tc.err); got != tc.want {
			t.Errorf("retryableOpen(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestOpenRetryGivesUpAtOnceWhenNobodyAnswers: a closed port is not a
// failover in progress, so the job fails without waiting out ctx.
func TestOpenRetryGivesUpAtOnceWhenNobodyAnswers(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := OpenRetry(ctx, "postgres://postgres@"+addr+"/x?sslmode=disable", slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("connected to a closed port")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("gave up after %s", d)
	}
	if _, err := OpenRetry(ctx, "postgres://%zz", slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("a malformed URL opened")
	}
}
