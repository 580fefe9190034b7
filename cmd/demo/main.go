// Command demo plays the four failure scenarios of docs/failure-scenarios.md
// (a client timeout and retry, two identical requests on two pods, a reused
// key, and a pod that crashes after the provider charged), then a refund
// whose answer the provider loses, a provider killed under traffic with a
// second one to fail over to, and a manual payment whose capture's answer is
// lost, against two providersims (providers sim_a and sim_b) and two
// paymentsvc pods on a fresh database, and prints what each pod answered and
// the tallies. It needs the binaries built first:
//
//	go build -o bin/ ./cmd/... && bin/demo
//
// It stops its processes and drops its database on exit, Ctrl-C included.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/acme/paymentsvc/internal/envflag"
)

const usage = `Usage: demo [flags]

Starts two providersims (providers sim_a and sim_b) and two paymentsvc pods on
a new database payments_demo_<unix>_<pid> on the DATABASE_URL's server, plays
the four failure scenarios of docs/failure-scenarios.md, a refund whose answer
is lost, an outage of sim_a with failover to sim_b and an authorization whose
capture's answer is lost, prints the tallies, then stops everything and drops
the database.

Every flag can also be set by the environment variable of the same name in
upper case (--bin-dir ⇔ BIN_DIR). Flags:`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the exit, returning the process status.
func run(args []string, stdout, stderr io.Writer) int {
	set := envflag.New("demo")
	set.SetUsageHeader(usage)
	dbURL := set.Secret("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/payments?sslmode=disable",
		"PostgreSQL server to create the demo's database on (its database name is ignored)")
	binDir := set.String("BIN_DIR", "bin", "directory holding the paymentsvc and providersim binaries")
	if err := set.Parse(args, stderr); err != nil {
		return envflag.ExitCode(err)
	}
	if set.FlagSet().NArg() > 0 {
		fmt.Fprintf(stderr, "demo takes no arguments, got %q\n", set.FlagSet().Args())
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	d := New(Config{DatabaseURL: *dbURL, BinDir: *binDir}, stdout)
	defer func() { _ = d.Close() }() // on a panic too; a second Close does nothing
	runErr := d.Run(ctx)
	closeErr := d.Close()
	switch {
	case errors.Is(runErr, context.Canceled):
		fmt.Fprintln(stderr, "demo: interrupted; processes stopped and database dropped")
		return 130
	case runErr != nil:
		fmt.Fprintf(stderr, "demo: %v\n", runErr)
		return 1
	case closeErr != nil:
		fmt.Fprintf(stderr, "demo: cleanup: %v\n", closeErr)
		return 1
	}
	return 0
}
