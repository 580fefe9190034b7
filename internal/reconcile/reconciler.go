package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acme/paymentsvc/internal/payments"
)

// ErrProviderUnreachable means the provider did not answer the reconciler's
// first call, so the job could not run (exit status 1).
var ErrProviderUnreachable = errors.New("provider unreachable")

// Reconciler runs the reconciler's jobs against one database and provider.
type Reconciler struct {
	pool     *pgxpool.Pool
	provider payments.Provider
	svc      *payments.Service
	cfg      Config
	log      *slog.Logger
}

// New returns a Reconciler; cfg must be valid (see Config.Validate).
func New(pool *pgxpool.Pool, p payments.Provider, cfg Config) (*Reconciler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	svc, err := payments.NewService(pool, p, cfg.Payments, cfg.Logger)
	if err != nil {
		return nil, err
	}
	return &Reconciler{pool: pool, provider: p, svc: svc, cfg: cfg, log: cfg.Logger}, nil
}

// probe asks the provider for an empty list of charges, so that a run that
// cannot reach it stops before it schedules anything.
func (r *Reconciler) probe(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Payments.RetryBudget+r.cfg.Payments.CallTimeout)
	defer cancel()
	now := time.Now()
	if _, err := r.provider.ListCharges(ctx, now, now); err != nil {
		if cerr := context.Cause(ctx); cerr != nil && !errors.Is(cerr, context.DeadlineExceeded) {
			return cerr // cancelled, not unreachable
		}
		return fmt.Errorf("%w: %w", ErrProviderUnreachable, err)
	}
	return nil
}
