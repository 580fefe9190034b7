package tracing

import (
	"context"
	"strings"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// PgxTracer is the tracer to set on the pool's pgx.ConnConfig: a client span
// per statement (and per batch, with its statements, and per preparation of
// a statement, the first time a connection runs it), named after the sqlc
// query ("query OutboxInsert", "prepare OutboxInsert") or else the SQL's
// first word ("query COMMIT"), carrying the SQL without its arguments, and
// a span per wait for a pool connection ("pool.acquire"). Statements run outside any traced request (the
// relay's loop) start no trace. Off, it is nil: pgx traces nothing.
func PgxTracer() pgx.QueryTracer {
	if !Enabled() {
		return nil
	}
	return otelpgx.NewTracer(otelpgx.WithSpanNameCtxFunc(statementName), otelpgx.WithQuerySpanNamePrefix())
}

// statementName is the name sqlc gives a query in its leading
// "-- name: OutboxInsert :exec" comment, or the statement's first word.
func statementName(ctx context.Context, sql string) string {
	if rest, ok := strings.CutPrefix(strings.TrimLeft(sql, " \t\r\n"), "-- name: "); ok {
		if name, _, ok := strings.Cut(rest, " "); ok && name != "" {
			return name
		}
	}
	return otelpgx.SQLOperationName(ctx, sql)
}

// StartTx starts the span of a database transaction, the parent of its
// statements (internal/db runs them in the returned context), if ctx's span
// is recording. Otherwise it returns ctx and nil; off, it costs one atomic
// load (not even a context lookup, which allocates on a detached context).
func StartTx(ctx context.Context) (context.Context, trace.Span) {
	if !Enabled() || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	return otel.Tracer(instrumentation).Start(ctx, "db.transaction",
		trace.WithSpanKind(trace.SpanKindClient))
}
