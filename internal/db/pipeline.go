package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"

	"github.com/acme/paymentsvc/internal/tracing"
)

// Pipeline is statements sent to the database in one round trip (a pgx
// batch: one pipeline, one Sync) and run as one implicit transaction: they
// all commit, or, from the first error on, none. It lets the owners of
// several tables each queue their own statement (through the generated
// query functions, as always) into one transaction of one round trip.
//
// A statement is queued with Add(call): call runs once against a recorder,
// which takes the generated function's SQL and arguments, and once more
// after Send against the statement's result, which the generated function
// scans as it always does. So call must make exactly one query call and
// keep what the second run returns (the first run's error is errRecorded).
type Pipeline struct {
	batch pgx.Batch
	calls []func(context.Context, DBTX) error
}

// errRecorded is what a generated function returns while it is recorded.
var errRecorded = errors.New("db: statement recorded for a pipeline")

// Add queues the one statement call makes through its DBTX.
func (p *Pipeline) Add(call func(ctx context.Context, q DBTX) error) {
	r := &recorder{}
	_ = call(context.Background(), r)
	if !r.done {
		panic("db: Pipeline.Add: the call made no query")
	}
	p.batch.Queue(r.sql, r.args...)
	p.calls = append(p.calls, call)
}

// Len is the number of statements queued.
func (p *Pipeline) Len() int { return len(p.calls) }

// Send runs the statements in one round trip on a connection of pool, then
// hands each its result (in order), and returns the first error: of the
// round trip, of a statement (translated), or of a call.
func (p *Pipeline) Send(ctx context.Context, pool *Pool) (err error) {
	// A transaction like WithTx's, in its own span with its statements.
	ctx, span := tracing.StartTx(ctx)
	if span != nil {
		defer func() {
			outcome := "commit"
			if err != nil {
				outcome = "rollback"
			}
			span.SetAttributes(attribute.String("db.transaction.outcome", outcome), attribute.Int("db.batch.size", p.Len()))
			endSpan(span, err)
		}()
	}
	br := pool.SendBatch(ctx, &p.batch)
	var errs []error
	rp := &replay{br: br}
	for _, call := range p.calls {
		if err := call(ctx, rp); err != nil {
			errs = append(errs, err)
		}
	}
	if err := br.Close(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("pipeline: %w", Translate(errs[0]))
	}
	return nil
}

// recorder is a DBTX that takes one statement instead of running it.
type recorder struct {
	sql  string
	args []any
	done bool
}

func (r *recorder) take(sql string, args []any) {
	if r.done {
		panic("db: Pipeline.Add: the call made more than one query")
	}
	r.sql, r.args, r.done = sql, args, true
}

func (r *recorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.take(sql, args)
	return pgconn.CommandTag{}, errRecorded
}

func (r *recorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.take(sql, args)
	return nil, errRecorded
}

func (r *recorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.take(sql, args)
	return errRow{errRecorded}
}

// replay is a DBTX that answers each call with the next result of a batch.
type replay struct{ br pgx.BatchResults }

func (r *replay) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return r.br.Exec()
}

func (r *replay) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return r.br.Query()
}

func (r *replay) QueryRow(context.Context, string, ...any) pgx.Row {
	return r.br.QueryRow()
}
