package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/acme/paymentsvc/db/migrations"
	"github.com/acme/paymentsvc/internal/redact"
	"github.com/acme/paymentsvc/internal/tracing"
)

// migrateLockID is the advisory lock that serialises migrations of pods starting together.
const migrateLockID int64 = 0x7061796d656e7473 // "payments"

// DefaultConnectTimeout is the bound of a new connection when DATABASE_URL
// sets no connect_timeout and DATABASE_TIMEOUT is not set: DefaultTimeout.
const DefaultConnectTimeout = DefaultTimeout

// Option is a setting of Open.
type Option func(*options)

type options struct{ timeout time.Duration }

// WithTimeout sets DATABASE_TIMEOUT: the bound of every wait on the
// database (Pool.Timeout), of a new connection unless DATABASE_URL sets
// connect_timeout, and of the kernel's patience with a silent connection
// (dialFunc). Zero or negative: DefaultTimeout.
func WithTimeout(d time.Duration) Option {
	return func(o *options) { o.timeout = d }
}

// Open connects a pool to databaseURL. Unless the URL sets pool_max_conns,
// the pool has DefaultMaxConns connections. Every wait on it is bounded by
// DATABASE_TIMEOUT (WithTimeout; DefaultTimeout by default), and so is a
// new connection unless the URL sets connect_timeout: a database that does
// not answer at all (a dead host, a partition) makes a request fail as
// unavailable after it, instead of hanging it. A connection that the server
// says cannot serve us (see ErrUnavailable), or that did not answer in
// time, is discarded, not reused. With tracing on, every statement is a
// span (tracing.PgxTracer).
func Open(ctx context.Context, databaseURL string, opts ...Option) (*Pool, error) {
	o := options{timeout: DefaultTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if o.timeout <= 0 {
		o.timeout = DefaultTimeout
	}
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	if !strings.Contains(databaseURL, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns()
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = o.timeout
	}
	cfg.ConnConfig.DialFunc = dialFunc(cfg.ConnConfig.ConnectTimeout, o.timeout)
	cfg.ConnConfig.OnPgError = discardOnUnavailable(cfg.ConnConfig.OnPgError)
	if t := tracing.PgxTracer(); t != nil { // tracing on: a span per statement
		cfg.ConnConfig.Tracer = t
	}
	pgxPool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	pool := &Pool{Pool: pgxPool, Timeout: o.timeout}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	return pool, nil
}

// EnsureDatabase creates the database named in databaseURL if it does not
// exist, connecting to the server's "postgres" database to do so.
func EnsureDatabase(ctx context.Context, databaseURL string) error {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	name := cfg.Database
	if name == "" {
		return errors.New("DATABASE_URL names no database")
	}
	probe, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		return probe.Close(ctx)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name
		return fmt.Errorf("connect: %w", err)
	}
	admin := cfg.Copy()
	admin.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect to create database %q: %w", name, err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	if err != nil && !isDuplicateDatabase(err) {
		return fmt.Errorf("create database %q: %w", name, err)
	}
	return waitCreated(ctx, cfg)
}

func isDuplicateDatabase(err error) bool {
	var pgErr *pgconn.PgError
	// 42P04 duplicate_database; 23505 when two creators race on pg_database.
	return errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505")
}

// Migrate applies every pending migration while holding a session advisory
// lock, so that pods starting together migrate one after another.
func Migrate(ctx context.Context, pool *Pool, log *slog.Logger) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrateLockID); err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrateLockID) }()

	sqlDB := stdlib.OpenDBFromPool(pool.Pool)
	defer sqlDB.Close()
	return runGoose(ctx, sqlDB, log)
}

func runGoose(ctx context.Context, sqlDB *sql.DB, log *slog.Logger) error {
	sub, err := fs.Sub(migrations.FS, ".")
	if err != nil {
		return err
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, sub)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, r := range results {
		log.Info("migration applied", "version", r.Source.Version, "path", r.Source.Path, "duration", r.Duration.String())
	}
	return nil
}

// Redact returns databaseURL without its password (in the user info or in
// the password query parameter, both of which pgx reads), for logs. A
// string that is not a URL (a keyword/value connection string) may hold a
// password anywhere, so it is replaced whole. It is redact.URL, the one
// masking of every configuration URL.
func Redact(databaseURL string) string {
	return redact.URL(databaseURL)
}
