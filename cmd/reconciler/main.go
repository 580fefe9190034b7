// Command reconciler is the one-shot job run from cron that resolves stale
// payment attempts (run), settles a day against the provider (settle) and
// deletes expired idempotency keys, old webhook events and published
// outbox rows (gc). The work is in internal/reconcile;
// this file parses flags, wires the database and the provider, prints the
// one JSON line and maps the outcome to the exit status.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/acme/paymentsvc/internal/app"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/envflag"
	"github.com/acme/paymentsvc/internal/reconcile"
	"github.com/acme/paymentsvc/internal/tracing"
)

// serviceName is the service.name of the job's traces unless
// OTEL_SERVICE_NAME says otherwise.
const serviceName = "reconciler"

// connectTimeout bounds reaching the database, retries included (a run
// started during a database failover waits for the new primary); the job
// exits 1 after it.
const connectTimeout = 15 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process: it returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) (string, bool), stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "run", "settle", "gc":
	case "help":
		topUsage(stderr, getenv)
		return 0
	default:
		fmt.Fprintf(stderr, "reconciler: unknown command %q\n\n", cmd)
		topUsage(stderr, getenv)
		return 2
	}
	set, s := newFlags(cmd, getenv)
	if err := set.Parse(args, stderr); err != nil {
		return envflag.ExitCode(err)
	}
	if set.FlagSet().NArg() > 0 {
		fmt.Fprintf(stderr, "reconciler %s: unexpected arguments %q\n", cmd, set.FlagSet().Args())
		return 2
	}
	if err := s.check(); err != nil {
		fmt.Fprintf(stderr, "reconciler %s: %v\n", cmd, err)
		return 2
	}

	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("job", "reconciler", "command", cmd)
	stopTracing, err := tracing.Setup(ctx, serviceName, log)
	if err != nil {
		log.Error("invalid tracing configuration", "err", err)
		return 1
	}
	defer stopTracing() // flushes the job's spans, bounded, before the exit
	log = tracing.Logger(log)
	shared := s.shared()
	cfg := s.config()
	cfg.Logger = log
	// The shared settings are checked as given, before the library fills
	// zero fields with defaults: PROVIDER_RETRY_BUDGET=0s is refused here as
	// it is by the pods, not silently replaced. cfg needs no check here: its
	// flags were checked by s.check, the rest are the library's defaults,
	// and reconcile.New checks it against the payments service's timing.
	if err := shared.Validate(); err != nil {
		log.Error("invalid configuration", "err", err)
		return 1
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	a, err := app.Open(cctx, shared, app.Options{WaitForPrimary: true}, log)
	cancel()
	if err != nil {
		log.Error("database unreachable", "database", db.Redact(shared.DatabaseURL), "err", err)
		return 1
	}
	defer a.Close()
	r, err := reconcile.New(a.Pool, a.Payments, cfg)
	if err != nil {
		log.Error("invalid configuration", "err", err)
		return 1
	}

	var out any
	switch cmd {
	case "run":
		out, err = r.Run(ctx)
	case "settle":
		day, _ := reconcile.ParseDay(*s.day) // checked above
		out, err = r.Settle(ctx, day)
	case "gc":
		out, err = r.GC(ctx)
	}
	if err != nil {
		// The partial result is in the log; stdout stays empty, so a caller
		// never mistakes it for a finished job's.
		log.Error("job could not run to the end", "err", err, "partial", out)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(out); err != nil {
		log.Error("write summary", "err", err)
		return 1
	}
	return 0
}
