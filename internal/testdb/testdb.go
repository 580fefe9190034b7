// Package testdb gives each test its own freshly migrated PostgreSQL database,
// cloned from a migrated template, so test packages run in parallel and
// repeatedly against the real server without sharing state; and one seeding
// fixture per table (fixtures.go, bulk.go). It imports the packages that own
// the tables, so their own tests use it from an external test package.
package testdb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/db/migrations"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/testkit"
)

// AdminURL is the server the tests use: TEST_DATABASE_URL, or the local
// PostgreSQL of the development machine and CI.
func AdminURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// URLFor returns the URL of database name on the admin server.
func URLFor(name string) string {
	cfg, err := pgx.ParseConfig(AdminURL())
	if err != nil {
		panic(err)
	}
	host := cfg.Host
	u := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, host, cfg.Port, name)
	if cfg.Password != "" {
		u = fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Password, host, cfg.Port, name)
	}
	return u
}

// PoolTimeout is the DATABASE_TIMEOUT of a test's pool (DB.Pool): long
// enough for the fixtures that seed big tables in one statement on a busy
// machine. Tests of the timeout itself open pools of their own.
const PoolTimeout = time.Minute

// DB is one test's database.
type DB struct {
	Name string
	URL  string
	Pool *db.Pool
}

// New creates a migrated database for t and drops it when t ends. It fails
// the test (never skips it) when PostgreSQL is unreachable.
func New(t testing.TB) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tmpl, err := template(ctx)
	if err != nil {
		t.Fatalf("testdb: template: %v", err)
	}
	name := testkit.RandomID("pt_")
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		t.Fatalf("testdb: connect to %s: %v", db.Redact(AdminURL()), err)
	}
	defer admin.Close(ctx)
	if err := cloneTemplate(ctx, admin, tmpl, name); err != nil {
		t.Fatalf("testdb: create %s: %v", name, err)
	}
	url := URLFor(name)
	pool, err := db.Open(ctx, url, db.WithTimeout(PoolTimeout))
	if err != nil {
		t.Fatalf("testdb: open %s: %v", name, err)
	}
	t.Cleanup(func() {
		pool.Close()
		dropDatabase(name)
	})
	return &DB{Name: name, URL: url, Pool: pool}
}

// NewEmpty returns the URL of a database name that does not exist yet, for
// tests of "create the database if missing", and drops it when t ends.
func NewEmpty(t testing.TB) string {
	t.Helper()
	name := testkit.RandomID("pt_")
	t.Cleanup(func() { dropDatabase(name) })
	return URLFor(name)
}

func cloneTemplate(ctx context.Context, admin *pgx.Conn, tmpl, name string) error {
	// CREATE DATABASE … TEMPLATE fails while another session is cloning the
	// same template; retry briefly.
	var err error
	for i := 0; i < 50; i++ {
		_, err = admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s",
			pgx.Identifier{name}.Sanitize(), pgx.Identifier{tmpl}.Sanitize()))
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(20+i*10) * time.Millisecond):
		}
	}
	return err
}

func dropDatabase(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		return
	}
	defer admin.Close(ctx)
	_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

// template returns the name of a migrated template database for the current
// migrations, creating it once per server under an advisory lock.
func template(ctx context.Context) (string, error) {
	name := "pt_template_" + migrationsHash()
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		return "", err
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(8124001)"); err != nil {
		return "", err
	}
	defer func() { _, _ = admin.Exec(context.Background(), "SELECT pg_advisory_unlock(8124001)") }()
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	building := name + "_build"
	_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{building}.Sanitize()+" WITH (FORCE)")
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{building}.Sanitize()); err != nil {
		return "", err
	}
	pool, err := db.Open(ctx, URLFor(building))
	if err != nil {
		return "", err
	}
	err = db.Migrate(ctx, pool, slog.New(slog.DiscardHandler))
	pool.Close()
	if err != nil {
		return "", err
	}
	// Renamed only once complete, so a crashed build never leaves a half template.
	if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s",
		pgx.Identifier{building}.Sanitize(), pgx.Identifier{name}.Sanitize())); err != nil {
		return "", err
	}
	return name, nil
}

func migrationsHash() string {
	h := sha256.New()
	entries, _ := fs.ReadDir(migrations.FS, ".")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		b, _ := fs.ReadFile(migrations.FS, n)
		h.Write([]byte(n))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
