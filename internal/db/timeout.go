package db

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/acme/paymentsvc/internal/metrics"
)

// DefaultTimeout is DATABASE_TIMEOUT's default: how long any one wait on
// the database may last (a pool connection, a statement, a batch, a COMMIT).
const DefaultTimeout = 5 * time.Second

// ErrTimeout is the cause of a wait that DATABASE_TIMEOUT ended: the
// database did not answer in time. Its error is ErrUnavailable once
// translated (pgconn marks it as a timeout); a COMMIT that ended so may have
// taken effect, like any COMMIT whose answer never came.
var ErrTimeout = errors.New("the database did not answer within DATABASE_TIMEOUT")

// ErrStalled is a database call not even tried because an earlier call of
// the same request outlasted DATABASE_TIMEOUT (see WithStallScope). It is
// ErrUnavailable.
var ErrStalled = fmt.Errorf("%w: an earlier call of this request got no answer within DATABASE_TIMEOUT", ErrUnavailable)

// stallScope is the flag WithStallScope puts in a request's context.
type stallScope struct{ stalled atomic.Bool }

type stallScopeKey struct{}

// WithStallScope returns ctx marked as one request's: once a database call
// made with it (or with a context derived from it, detached ones included)
// outlasts DATABASE_TIMEOUT, every later call made with it fails at once
// with ErrStalled instead of waiting again. A request then answers within
// one DATABASE_TIMEOUT of the moment the database stopped answering,
// however many calls it would have made after that (a fallback path, a
// release). The API marks every request so; a background loop's calls are
// each bounded by DATABASE_TIMEOUT only.
func WithStallScope(ctx context.Context) context.Context {
	if _, ok := ctx.Value(stallScopeKey{}).(*stallScope); ok {
		return ctx
	}
	return context.WithValue(ctx, stallScopeKey{}, &stallScope{})
}

// stalledBefore is ErrStalled if ctx's scope saw a call stall, else nil.
func stalledBefore(ctx context.Context) error {
	if s, ok := ctx.Value(stallScopeKey{}).(*stallScope); ok && s.stalled.Load() {
		return ErrStalled
	}
	return nil
}

// markStalled records in ctx's scope (if any) that a call stalled.
func markStalled(ctx context.Context) {
	if s, ok := ctx.Value(stallScopeKey{}).(*stallScope); ok {
		s.stalled.Store(true)
	}
}

// timeout is p's DATABASE_TIMEOUT.
func (p *Pool) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return DefaultTimeout
}

// Bound returns ctx bounded by DATABASE_TIMEOUT, for a wait made of several
// calls that must end within one DATABASE_TIMEOUT as a whole (/readyz: the
// connection and the ping), and for the waits on a connection of its own
// that does not go through the pool (the outbox relay's LISTEN session).
// Every single call through the pool is bounded already.
func (p *Pool) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, p.timeout(), ErrTimeout)
}

// wait is one statement's (or batch's, COMMIT's…) wait on the database.
type wait struct {
	p      *Pool
	parent context.Context
	ctx    context.Context
	cancel context.CancelFunc
}

// start begins a wait, bounded by DATABASE_TIMEOUT.
func (p *Pool) start(ctx context.Context) *wait {
	wctx, cancel := p.Bound(ctx)
	return &wait{p: p, parent: ctx, ctx: wctx, cancel: cancel}
}

// end ends the wait, whose call returned err. A call that DATABASE_TIMEOUT
// ended (pgconn closed its connection) is a stall: the request's scope
// fails its later calls at once, and every idle connection of the pool is
// closed, as they are probably as silent as this one was and a request
// would otherwise find each of them out only by waiting on it in turn
// (connections in use are closed when they come back).
func (w *wait) end(err error) {
	stalled := err != nil && errors.Is(context.Cause(w.ctx), ErrTimeout)
	w.cancel()
	if !stalled {
		return
	}
	metrics.DatabaseTimeouts.Inc()
	markStalled(w.parent)
	w.p.Pool.Reset()
}
