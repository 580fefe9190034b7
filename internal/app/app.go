// Package app builds what both binaries run on from the settings they share
// (internal/settings): the database pool, the provider client and the
// payments service. paymentsvc (internal/server) and the reconciler
// (cmd/reconciler) are wired through it and nowhere else, so the reconciler
// calls the provider with the same client, breaker and timings as the pods.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/metrics"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/provider/sim"
	"github.com/acme/paymentsvc/internal/provider/stripe"
	"github.com/acme/paymentsvc/internal/settings"
)

// Options say how Open treats the database.
type Options struct {
	// CreateDatabase creates the database named in DATABASE_URL if it does
	// not exist (paymentsvc; never the reconciler).
	CreateDatabase bool
	// Migrate applies pending migrations (under an advisory lock).
	Migrate bool
	// WaitForPrimary keeps trying, until ctx ends, while the database fails
	// over (no host accepts writes yet): for a job started from cron.
	WaitForPrimary bool
	// DatabaseTimeout is DATABASE_TIMEOUT (zero: db.DefaultTimeout).
	DatabaseTimeout time.Duration
}

// App is the wired service.
type App struct {
	Pool      *db.Pool
	Providers []*provider.Resilient // in their default routing order
	Payments  *payments.Service
}

// Open connects to the database (creating and migrating it as opt says) and
// builds the provider client and the payments service on it. s must be valid.
func Open(ctx context.Context, s settings.Shared, opt Options, log *slog.Logger) (*App, error) {
	opt.DatabaseTimeout = s.DatabaseTimeout
	pool, err := OpenDB(ctx, s.DatabaseURL, opt, log)
	if err != nil {
		return nil, err
	}
	// One HTTP client (its connection pools are per host), and one breaker
	// and retry budget per provider.
	httpClient := provider.PooledHTTP(s.CallTimeout)
	var (
		provs []*provider.Resilient
		ps    []payments.Provider
	)
	for _, setting := range s.Providers {
		var caller provider.Caller
		switch setting.Type {
		case settings.TypeSim:
			caller = sim.NewHTTPClient(setting.Name, setting.URL, setting.APIKey, httpClient)
		case settings.TypeStripe:
			caller = stripe.New(setting.Name, setting.URL, setting.APIKey, httpClient)
		default:
			pool.Close()
			return nil, fmt.Errorf("provider %s: type %q has no connector in this build", setting.Name, setting.Type)
		}
		r := provider.NewResilient(caller, s.Provider(), log)
		provs, ps = append(provs, r), append(ps, r)
	}
	svc, err := payments.NewRouted(pool, ps, s.Payments(), log)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &App{Pool: pool, Providers: provs, Payments: svc}, nil
}

// Close closes the pool.
func (a *App) Close() { a.Pool.Close() }

// OpenDB connects a pool to databaseURL, creating and migrating the database
// as opt says.
func OpenDB(ctx context.Context, databaseURL string, opt Options, log *slog.Logger) (*db.Pool, error) {
	if opt.CreateDatabase {
		if err := db.EnsureDatabase(ctx, databaseURL); err != nil {
			return nil, err
		}
	}
	open := db.Open
	if opt.WaitForPrimary {
		open = func(ctx context.Context, url string, opts ...db.Option) (*db.Pool, error) {
			return db.OpenRetry(ctx, url, log, opts...)
		}
	}
	pool, err := open(ctx, databaseURL, db.WithTimeout(opt.DatabaseTimeout))
	if err != nil {
		return nil, err
	}
	if opt.Migrate {
		if err := db.Migrate(ctx, pool, log); err != nil {
			pool.Close()
			return nil, err
		}
	}
	return pool, nil
}

// Backlog reads the unresolved attempts for the metrics' backlog gauges.
func (a *App) Backlog(ctx context.Context) ([]metrics.Backlog, error) {
	rows, err := attempts.Unresolved(ctx, a.Pool)
	if err != nil {
		return nil, err
	}
	out := make([]metrics.Backlog, len(rows))
	for i, r := range rows {
		out[i] = metrics.Backlog{Status: string(r.Status), Unresolved: r.Unresolved, NeedsReview: r.NeedsReview, OldestSeconds: r.OldestSeconds}
	}
	return out, nil
}
