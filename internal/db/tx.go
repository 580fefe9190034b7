package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Q is the one stateless query set; every query takes its executor.
var Q = New()

// Sentinel errors that callers check instead of driver errors.
var (
	// ErrNotFound is a query that found no row (pgx.ErrNoRows).
	ErrNotFound = errors.New("not found")
	// ErrConflict is a unique-constraint violation (SQLSTATE 23505).
	ErrConflict = errors.New("conflict")
)

// errNoRows is Translate(pgx.ErrNoRows), made once.
var errNoRows = fmt.Errorf("%w: %w", ErrNotFound, pgx.ErrNoRows)

// Translate maps driver errors to this package's sentinels (ErrNotFound,
// ErrConflict, ErrUnavailable), keeping the original in the chain for logs.
// It is the only place that knows SQLSTATEs (with unavailableCode, which it
// uses). An error that already wraps a sentinel is returned as is.
func Translate(err error) error {
	switch err {
	case nil, errRecorded:
		return err // no error; or a pipeline's recording run, whose error is dropped
	case pgx.ErrNoRows:
		return errNoRows // the common miss, without the checks below or an allocation
	}
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) || errors.Is(err, ErrUnavailable) {
		return err
	}
	if unavailable(err) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("%w (%s): %w", ErrConflict, pgErr.ConstraintName, err)
	}
	return err
}

// ConstraintName returns the violated constraint of a Postgres error, or "".
func ConstraintName(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.ConstraintName
	}
	return ""
}

// WithTx runs fn in a transaction and commits it if fn returns nil. A
// connection not acquired within ctx's deadline is ErrUnavailable. A failed
// COMMIT is returned as is (Translate makes it ErrUnavailable when the
// connection failed or did not answer within DATABASE_TIMEOUT): it may
// have taken effect. The rollback is detached from ctx (bounded by
// DATABASE_TIMEOUT, as every statement is): a cancelled request must still
// release its transaction promptly rather than leave it to the pool.
func WithTx(ctx context.Context, pool *Pool, fn func(tx pgx.Tx) error) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrUnavailable) {
			// No connection within the caller's deadline: the pool could not
			// get one from the database in time.
			return fmt.Errorf("begin: %w: %w", ErrUnavailable, err)
		}
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // no-op after a commit
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
