// Command paymentsvc is the payment-orchestration service: `serve` (the
// default) runs the HTTP API, webhooks and the outbox relay; `migrate`
// applies migrations; `tenant create --name NAME` makes a tenant and prints
// its API key once; `operator create|disable` manages the console's
// operators; `healthcheck` asks a running one for /healthz (the container
// image's HEALTHCHECK).
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

	"github.com/acme/paymentsvc/internal/app"
	"github.com/acme/paymentsvc/internal/envflag"
	"github.com/acme/paymentsvc/internal/server"
	"github.com/acme/paymentsvc/internal/tenants"
)

const usage = `Usage:
  paymentsvc [serve] [flags]              run the service (default)
  paymentsvc migrate [flags]              apply pending migrations and exit
  paymentsvc tenant create --name NAME    create a tenant; prints its API key once
  paymentsvc operator create --email E --role viewer|operator|admin
                                          create a console operator; prints
                                          {"email","role","password"}: the password once
  paymentsvc operator disable --email E   disable an operator: its sessions end at once
                                          and it cannot sign in again
  paymentsvc healthcheck [--url URL]      GET http://HTTP_ADDR/healthz (a wildcard host
                                          means 127.0.0.1), or URL; exit 0 if it answers
                                          200, else 1 (for container HEALTHCHECKs)

Tracing (environment only, the OpenTelemetry SDK's variables): on when
OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (and
OTEL_SDK_DISABLED is not true); OTEL_SERVICE_NAME defaults to "paymentsvc".
See docs/configuration.md.

Every flag can also be set by the environment variable of the same name in
upper case (--database-url ⇔ DATABASE_URL). Flags:`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the exit, returning the process status.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	sub := ""
	switch cmd {
	case "tenant":
		if len(args) == 0 || args[0] != "create" {
			fmt.Fprintln(stderr, "usage: paymentsvc tenant create --name NAME")
			return 2
		}
		args = args[1:]
	case "operator":
		if len(args) == 0 || (args[0] != "create" && args[0] != "disable") {
			fmt.Fprintln(stderr, operatorUsage)
			return 2
		}
		sub, args = args[0], args[1:]
	}
	set := envflag.New("paymentsvc")
	set.SetUsageHeader(usage)
	config := server.Flags(set)
	name := set.FlagSet().String("name", "", "tenant name (tenant create)")
	checkURL := set.FlagSet().String("url", "", "URL to GET instead of http://HTTP_ADDR/healthz (healthcheck)")
	email := set.FlagSet().String("email", "", "the operator's email (operator create|disable)")
	role := set.FlagSet().String("role", "", "the operator's role: viewer, operator or admin (operator create)")
	if err := set.Parse(args, stderr); err != nil {
		return envflag.ExitCode(err)
	}
	if set.FlagSet().NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments %q\n", set.FlagSet().Args())
		return 2
	}
	cfg := config()
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	switch cmd {
	case "healthcheck":
		return healthcheck(ctx, *checkURL, cfg.HTTPAddr, stderr)
	case "serve":
		if err := server.Serve(ctx, cfg, log); err != nil {
			log.Error("paymentsvc stopped", "err", err)
			return 1
		}
	case "migrate":
		pool, err := app.OpenDB(ctx, cfg.DatabaseURL, app.Options{CreateDatabase: true, Migrate: true, DatabaseTimeout: cfg.DatabaseTimeout}, log)
		if err != nil {
			log.Error("migrate failed", "err", err)
			return 1
		}
		pool.Close()
		log.Info("migrations applied")
	case "tenant":
		if strings.TrimSpace(*name) == "" {
			fmt.Fprintln(stderr, "tenant create: --name is required")
			return 2
		}
		pool, err := app.OpenDB(ctx, cfg.DatabaseURL, app.Options{CreateDatabase: true, Migrate: cfg.AutoMigrate, DatabaseTimeout: cfg.DatabaseTimeout}, log)
		if err != nil {
			log.Error("tenant create failed", "err", err)
			return 1
		}
		defer pool.Close()
		t, err := tenants.Create(ctx, pool, *name)
		if err != nil {
			log.Error("tenant create failed", "err", err)
			return 1
		}
		_ = json.NewEncoder(stdout).Encode(t)
	case "operator":
		return operator(ctx, cfg.DatabaseURL, cfg.AutoMigrate, sub, *email, *role, stdout, stderr, log)
	default:
		fmt.Fprintf(stderr, "unknown command %q\n\n", cmd)
		set.FlagSet().SetOutput(stderr)
		set.FlagSet().Usage()
		return 2
	}
	return 0
}
