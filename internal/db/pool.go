package db

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/acme/paymentsvc/internal/metrics"
	"github.com/acme/paymentsvc/internal/tracing"
)

// DefaultAcquireTimeout is DefaultTimeout, the bound of the wait for a pool
// connection when DATABASE_TIMEOUT is not set. Past it the database is
// treated as unavailable (the API answers 503) rather than letting requests
// queue without end behind a slow database.
const DefaultAcquireTimeout = DefaultTimeout

// ErrAcquireTimeout is a wait for a pool connection that outlasted the
// pool's acquire timeout.
var ErrAcquireTimeout = errors.New("no database connection free within the acquire timeout")

// DefaultMaxConns is the pool size when DATABASE_URL sets no
// pool_max_conns: enough connections for the concurrency a pod serves (a
// create holds one for a few milliseconds at a time, never across the
// provider call), and never fewer than 16, so that /metrics and /readyz
// (each of which takes at most one, briefly) cannot starve payments.
func DefaultMaxConns() int32 { return int32(max(16, 4*runtime.GOMAXPROCS(0))) }

// Pool is a pgxpool.Pool every wait of which is bounded by Timeout
// (DATABASE_TIMEOUT): the wait for a connection, then each statement, batch,
// COMMIT or ROLLBACK on it, transactions' statements included, whatever
// context the caller passes (a detached one included). Everything that
// talks to the database goes through one, so no package sets deadlines of
// its own. A connection whose wait ended that way is closed and leaves the
// pool at once (see release), and so do the pool's idle ones (wait.end).
type Pool struct {
	*pgxpool.Pool
	// Timeout bounds each wait on the database; zero is DefaultTimeout.
	Timeout time.Duration
	// AcquireTimeout, when not zero, bounds the wait for a connection
	// instead of Timeout.
	AcquireTimeout time.Duration
}

var _ DBTX = (*Pool)(nil)

// Acquire returns a connection, waiting at most p.AcquireTimeout (else
// p.Timeout); the wait ends with an error wrapping ErrAcquireTimeout and
// ErrUnavailable. ctx still bounds it too. Statements on the connection
// itself are bounded only by their own contexts: Release it, or Hijack and
// close it, when done.
func (p *Pool) Acquire(ctx context.Context) (*pgxpool.Conn, error) {
	if err := stalledBefore(ctx); err != nil {
		return nil, err
	}
	d := p.AcquireTimeout
	if d <= 0 {
		d = p.timeout()
	}
	actx, cancel := context.WithTimeoutCause(ctx, d, ErrAcquireTimeout)
	defer cancel()
	c, err := p.Pool.Acquire(actx)
	switch {
	case err == nil || ctx.Err() != nil:
	case errors.Is(context.Cause(actx), ErrAcquireTimeout):
		markStalled(ctx)
		return nil, fmt.Errorf("%w: %w (%s)", ErrUnavailable, ErrAcquireTimeout, d)
	case timedOut(err):
		markStalled(ctx) // a new connection that got no answer within its connect timeout
	}
	return c, err
}

// timedOut reports whether err is a wait that ran out (a deadline, a
// network timeout), as opposed to an answer, a refusal or a reset.
func timedOut(err error) bool {
	var ne net.Error
	return pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// release gives c back to the pool, unless pgconn closed it (a deadline, a
// cancelled context, a broken connection): then it is taken out of the pool
// at once. Given back, pgxpool would keep its slot until the close is
// complete, which on a silent server is after pgconn's cancel request and
// goodbye have waited their 15 s; the pool could open no connection in its
// place meanwhile. pgconn's own clean-up still closes the socket.
func release(c *pgxpool.Conn) {
	if c.Conn().IsClosed() {
		_ = c.Hijack()
		return
	}
	c.Release()
}

// Exec runs sql on a connection of the pool.
func (p *Pool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c, err := p.Acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer release(c)
	w := p.start(ctx)
	tag, err := c.Exec(w.ctx, sql, args...)
	w.end(err)
	return tag, err
}

// Query runs sql on a connection that is released when the rows are closed
// (or read to the end).
func (p *Pool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c, err := p.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	w := p.start(ctx)
	rows, err := c.Query(w.ctx, sql, args...)
	if err != nil {
		w.end(err)
		release(c)
		return nil, err
	}
	return newPoolRows(rows, w, func() { release(c) }), nil
}

// QueryRow runs sql on a connection that is released by Scan.
func (p *Pool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c, err := p.Acquire(ctx)
	if err != nil {
		return errRow{err}
	}
	w := p.start(ctx)
	return poolRow{row: c.QueryRow(w.ctx, sql, args...), done: newDone(w, func() { release(c) })}
}

// SendBatch sends b on a connection that is released when the results are
// closed. Without an explicit BEGIN the batch runs as one implicit
// transaction.
func (p *Pool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	c, err := p.Acquire(ctx)
	if err != nil {
		return errBatch{err}
	}
	w := p.start(ctx)
	return &poolBatch{BatchResults: c.SendBatch(w.ctx, b), done: newDone(w, func() { release(c) })}
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
	w := p.start(tctx)
	tx, err := c.BeginTx(w.ctx, opts)
	w.end(err)
	if err != nil {
		endSpan(span, err)
		release(c)
		return nil, err
	}
	return &poolTx{Tx: tx, p: p, release: sync.OnceFunc(func() { release(c) }), span: span}, nil
}

// Ping checks that a connection can be had and answers.
func (p *Pool) Ping(ctx context.Context) error {
	c, err := p.Acquire(ctx)
	if err != nil {
		return err
	}
	defer release(c)
	w := p.start(ctx)
	err = c.Ping(w.ctx)
	w.end(err)
	return err
}

// done ends a call's wait with its error and gives its connection back, the
// first time only: rows may be closed, and a batch's results too, more than
// once.
type done struct {
	once    sync.Once
	w       *wait
	release func()
}

func newDone(w *wait, release func()) *done { return &done{w: w, release: release} }

func (d *done) end(err error) {
	d.once.Do(func() {
		d.w.end(err)
		d.release()
	})
}

type poolRows struct {
	pgx.Rows
	done *done
}

func newPoolRows(rows pgx.Rows, w *wait, release func()) *poolRows {
	return &poolRows{Rows: rows, done: newDone(w, release)}
}

func (r *poolRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.done.end(r.Rows.Err()) // pgx closed the rows
	return false
}

func (r *poolRows) Close() {
	r.Rows.Close()
	r.done.end(r.Rows.Err())
}

type poolRow struct {
	row  pgx.Row
	done *done
}

func (r poolRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	r.done.end(err)
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type poolBatch struct {
	pgx.BatchResults
	done *done
}

func (b *poolBatch) Close() error {
	err := b.BatchResults.Close()
	b.done.end(err)
	return err
}

type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }

// poolTx is a transaction on a connection of the pool, each statement of
// which (COMMIT and ROLLBACK included) is bounded like the pool's. When the
// request is traced, span is the transaction's: its statements are run as
// its children (whatever context the caller passes, the span is swapped
// in), and it ends with the COMMIT or ROLLBACK.
type poolTx struct {
	pgx.Tx
	p       *Pool
	release func()
	span    trace.Span // nil when not traced
}

// start begins the wait of one statement of the transaction.
func (t *poolTx) start(ctx context.Context) *wait {
	if t.span != nil {
		ctx = trace.ContextWithSpan(ctx, t.span)
	}
	return t.p.start(ctx)
}

func (t *poolTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	w := t.start(ctx)
	tag, err := t.Tx.Exec(w.ctx, sql, args...)
	w.end(err)
	return tag, err
}

func (t *poolTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	w := t.start(ctx)
	rows, err := t.Tx.Query(w.ctx, sql, args...)
	if err != nil {
		w.end(err)
		return nil, err
	}
	return newPoolRows(rows, w, func() {}), nil
}

func (t *poolTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	w := t.start(ctx)
	return poolRow{row: t.Tx.QueryRow(w.ctx, sql, args...), done: newDone(w, func() {})}
}

func (t *poolTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	w := t.start(ctx)
	return &poolBatch{BatchResults: t.Tx.SendBatch(w.ctx, b), done: newDone(w, func() {})}
}

func (t *poolTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	w := t.start(ctx)
	n, err := t.Tx.CopyFrom(w.ctx, table, columns, src)
	w.end(err)
	return n, err
}

func (t *poolTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	w := t.start(ctx)
	sd, err := t.Tx.Prepare(w.ctx, name, sql)
	w.end(err)
	return sd, err
}

func (t *poolTx) Commit(ctx context.Context) error {
	defer t.release()
	w := t.start(ctx)
	err := t.Tx.Commit(w.ctx)
	w.end(err)
	t.end("commit", err)
	return err
}

func (t *poolTx) Rollback(ctx context.Context) error {
	defer t.release()
	w := t.start(ctx)
	err := t.Tx.Rollback(w.ctx)
	w.end(err)
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

// ConnectionStats are the pool's connections now, for the metrics
// (metrics.RegisterPool): no database round trip.
func (p *Pool) ConnectionStats() metrics.PoolStat {
	s := p.Stat()
	return metrics.PoolStat{
		Total: s.TotalConns(), Idle: s.IdleConns(), Acquired: s.AcquiredConns(),
		Constructing: s.ConstructingConns(), Max: s.MaxConns(),
	}
}
