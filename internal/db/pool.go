package db

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/acme/paymentsvc/internal/tracing"
)

// DefaultAcquireTimeout bounds the wait for a pool connection. Past it the
// database is treated as unavailable (the API answers 503) rather than
// letting requests queue without end behind a slow database.
const DefaultAcquireTimeout = 5 * time.Second

// ErrAcquireTimeout is a wait for a pool connection that outlasted the
// pool's acquire timeout.
var ErrAcquireTimeout = errors.New("no database connection free within the acquire timeout")

// DefaultMaxConns is the pool size when DATABASE_URL sets no
// pool_max_conns: enough connections for the concurrency a pod serves (a
// create holds one for a few milliseconds at a time, never across the
// provider call), and never fewer than 16, so that /metrics and /readyz
// (each of which takes at most one, briefly) cannot starve payments.
func DefaultMaxConns() int32 { return int32(max(16, 4*runtime.GOMAXPROCS(0))) }

// Pool is a pgxpool.Pool whose every use waits at most AcquireTimeout for a
// connection. Everything that talks to the database goes through one.
type Pool struct {
	*pgxpool.Pool
	AcquireTimeout time.Duration
}

var _ DBTX = (*Pool)(nil)

// Acquire returns a connection, waiting at most p.AcquireTimeout; the wait
// ends with an error wrapping ErrAcquireTimeout. ctx still bounds it too.
func (p *Pool) Acquire(ctx context.Context) (*pgxpool.Conn, error) {
	d := p.AcquireTimeout
	if d <= 0 {
		d = DefaultAcquireTimeout
	}
	actx, cancel := context.WithTimeoutCause(ctx, d, ErrAcquireTimeout)
	defer cancel()
	c, err := p.Pool.Acquire(actx)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), ErrAcquireTimeout) {
		return nil, fmt.Errorf("%w: %w (%s)", ErrUnavailable, ErrAcquireTimeout, d)
	}
	return c, err
}

// Exec runs sql on a connection of the pool.
func (p *Pool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c, err := p.Acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer c.Release()
	return c.Exec(ctx, sql, args...)
}

// Query runs sql on a connection that is released when the rows are closed
// (or read to the end).
func (p *Pool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c, err := p.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		c.Release()
		return nil, err
	}
	return &poolRows{Rows: rows, release: sync.OnceFunc(c.Release)}, nil
}

// QueryRow runs sql on a connection that is released by Scan.
func (p *Pool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c, err := p.Acquire(ctx)
	if err != nil {
		return errRow{err}
	}
	return poolRow{row: c.QueryRow(ctx, sql, args...), release: c.Release}
}

// SendBatch sends b on a connection that is released when the results are
// closed. Without an explicit BEGIN the batch runs as one implicit
// transaction.
func (p *Pool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	c, err := p.Acquire(ctx)
	if err != nil {
		return errBatch{err}
	}
	return &poolBatch{BatchResults: c.SendBatch(ctx, b), release: sync.OnceFunc(c.Release)}
}

// Begin starts a transaction on a connection that is released when the
// transaction ends.
func (p *Pool) Begin(ctx context.Context) (pgx.Tx, error) {
	return p.BeginTx(ctx, pgx.TxOptions{})
}

// BeginTx is Begin with options.
func (p *Pool) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	c, err := p.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	tctx, span := tracing.StartTx(ctx)
	tx, err := c.BeginTx(tctx, opts)
	if err != nil {
		endSpan(span, err)
		c.Release()
		return nil, err
	}
	return &poolTx{Tx: tx, release: sync.OnceFunc(c.Release), span: span}, nil
}

// Ping checks that a connection can be had and answers.
func (p *Pool) Ping(ctx context.Context) error {
	c, err := p.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	return c.Ping(ctx)
}

type poolRows struct {
	pgx.Rows
	release func()
}

func (r *poolRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.release() // pgx closed the rows
	return false
}

func (r *poolRows) Close() {
	r.Rows.Close()
	r.release()
}

type poolRow struct {
	row     pgx.Row
	release func()
}

func (r poolRow) Scan(dest ...any) error {
	defer r.release()
	return r.row.Scan(dest...)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type poolBatch struct {
	pgx.BatchResults
	release func()
}

func (b *poolBatch) Close() error {
	defer b.release()
	return b.BatchResults.Close()
}

type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }

// poolTx is a transaction on a connection of the pool. When the request is
// traced, span is the transaction's: its statements are run as its children
// (whatever context the caller passes, the span is swapped in), and it ends
// with the COMMIT or ROLLBACK.
type poolTx struct {
	pgx.Tx
	release func()
	span    trace.Span // nil when not traced
}

// in returns ctx with the transaction's span as the current span.
func (t *poolTx) in(ctx context.Context) context.Context {
	if t.span == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, t.span)
}

func (t *poolTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.Tx.Exec(t.in(ctx), sql, args...)
}

func (t *poolTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.Tx.Query(t.in(ctx), sql, args...)
}

func (t *poolTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.Tx.QueryRow(t.in(ctx), sql, args...)
}

func (t *poolTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.Tx.SendBatch(t.in(ctx), b)
}

func (t *poolTx) Commit(ctx context.Context) error {
	defer t.release()
	err := t.Tx.Commit(t.in(ctx))
	t.end("commit", err)
	return err
}

func (t *poolTx) Rollback(ctx context.Context) error {
	defer t.release()
	err := t.Tx.Rollback(t.in(ctx))
	if !errors.Is(err, pgx.ErrTxClosed) { // else after a commit: the span has ended already
		t.end("rollback", err)
	}
	return err
}

// end ends the transaction's span, saying how the transaction ended.
func (t *poolTx) end(outcome string, err error) {
	if t.span != nil {
		t.span.SetAttributes(attribute.String("db.transaction.outcome", outcome))
		endSpan(t.span, err)
		t.span = nil
	}
}

func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "transaction failed")
	}
	span.End()
}
