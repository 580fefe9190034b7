package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/provider"
)

// ErrProviderUnreachable means the provider did not answer the reconciler's
// first call, so the job could not run (exit status 1).
var ErrProviderUnreachable = errors.New("provider unreachable")

// Reconciler runs the reconciler's jobs against one database and provider.
type Reconciler struct {
	pool      *db.Pool
	svc       *payments.Service
	providers []payments.Provider // svc's, in their default order
	timing    payments.Config     // svc's
	cfg       Config
	log       *slog.Logger
}

// New returns a Reconciler that resolves attempts through svc, the same
// payments service (and so the same provider client and timing settings)
// the pods run; cfg must be valid with svc's timing.
func New(pool *db.Pool, svc *payments.Service, cfg Config) (*Reconciler, error) {
	timing := svc.Config()
	if err := cfg.validate(timing); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Reconciler{pool: pool, svc: svc, providers: svc.Providers(), timing: timing, cfg: cfg, log: cfg.Logger}, nil
}

// probe asks every provider for an empty list of charges, so that a run
// that can reach none of them stops before it schedules anything. One that
// cannot be reached is logged; its attempts wait (their checks find it
// unreachable, or its breaker open).
//
// The providers are asked at once, each with its own deadline (one retry
// budget and call timeout), so a provider that hangs cannot eat into the
// time of the next one.
func (r *Reconciler) probe(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := time.Now()
	results := make([]error, len(r.providers))
	var wg sync.WaitGroup
	for i, p := range r.providers {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, r.timing.RetryBudget+r.timing.CallTimeout)
			defer cancel()
			_, results[i] = p.ListCharges(pctx, provider.ListQuery{From: now, To: now, Limit: 1})
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err // cancelled, not unreachable
	}
	var errs []error
	for i, err := range results {
		if err != nil {
			p := r.providers[i]
			r.log.Warn("provider unreachable", "provider", p.Name(), "err", err)
			errs = append(errs, fmt.Errorf("%s: %w", p.Name(), err))
		}
	}
	if len(errs) == len(r.providers) {
		return fmt.Errorf("%w: %w", ErrProviderUnreachable, errors.Join(errs...))
	}
	return nil
}

// allBreakersOpen reports whether every provider's breaker refuses calls.
func (r *Reconciler) allBreakersOpen() bool {
	for _, p := range r.providers {
		if !p.BreakerOpen() {
			return false
		}
	}
	return true
}
