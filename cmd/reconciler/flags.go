package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/acme/paymentsvc/internal/envflag"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/reconcile"
)

// Defaults of the settings shared with paymentsvc (CONTRACT.md §2).
const (
	defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/payments?sslmode=disable"
	defaultProviderURL = "http://127.0.0.1:9300"
	defaultAPIKey      = "sk_sim"
)

// secretEnvs are settings whose values -h must not print: envflag takes
// defaults from the environment, where they hold real credentials.
var secretEnvs = []string{"DATABASE_URL", "PROVIDER_API_KEY"}

// settings is one command's configuration.
type settings struct {
	databaseURL, providerURL, apiKey *string
	lockTTL, keyTTL                  *time.Duration
	callTimeout, retryBudget         *time.Duration
	breakerFailures                  *int
	breakerCooldown                  *time.Duration

	// run
	minAge    *time.Duration
	batchSize *int
	// settle
	day *string
}

// newFlags registers the settings of command cmd. RECONCILER_MIN_AGE and
// RECONCILER_BATCH_SIZE are namespaced aliases of MIN_AGE and BATCH_SIZE
// (the variables the contract's naming rule gives --min-age and
// --batch-size) and win over them, for crontabs shared with other jobs.
func newFlags(cmd string, getenv func(string) (string, bool)) (*envflag.Set, *settings) {
	lookup := func(name string) (string, bool) {
		switch name {
		case "MIN_AGE", "BATCH_SIZE":
			if v, ok := getenv("RECONCILER_" + name); ok && v != "" {
				return v, true
			}
		}
		return getenv(name)
	}
	set := envflag.NewWithLookup("reconciler "+cmd, lookup)
	s := &settings{
		databaseURL:     set.String("DATABASE_URL", defaultDatabaseURL, "PostgreSQL URL of the payments database (never created by the reconciler)"),
		providerURL:     set.String("PROVIDER_URL", defaultProviderURL, "base URL of the payment provider"),
		apiKey:          set.String("PROVIDER_API_KEY", defaultAPIKey, "API key sent to the provider as Authorization: Bearer"),
		lockTTL:         set.Duration("IDEMPOTENCY_LOCK_TTL", reconcile.DefaultLockTTL, "how long an in-progress key stays locked to its owner"),
		keyTTL:          set.Duration("IDEMPOTENCY_KEY_TTL", reconcile.DefaultKeyTTL, "how long a key and its stored response are kept"),
		callTimeout:     set.Duration("PROVIDER_CALL_TIMEOUT", provider.DefaultCallTimeout, "one HTTP call to the provider"),
		retryBudget:     set.Duration("PROVIDER_RETRY_BUDGET", provider.DefaultRetryBudget, "total time spent retrying one provider call"),
		breakerFailures: set.Int("PROVIDER_BREAKER_FAILURES", provider.DefaultBreakerFailures, "consecutive failed provider calls that open the breaker"),
		breakerCooldown: set.Duration("PROVIDER_BREAKER_COOLDOWN", provider.DefaultBreakerCooldown, "how long the breaker stays open"),
	}
	switch cmd {
	case "run":
		s.minAge = set.Duration("MIN_AGE", reconcile.DefaultMinAge, "act only on attempts unchanged for this long [env RECONCILER_MIN_AGE wins]")
		s.batchSize = set.Int("BATCH_SIZE", reconcile.DefaultBatchSize, fmt.Sprintf("attempts claimed per batch, 1-%d [env RECONCILER_BATCH_SIZE wins]", reconcile.MaxBatchSize))
	case "settle":
		s.day = set.FlagSet().String("day", "", "the UTC day to settle, YYYY-MM-DD (required)")
	}
	set.FlagSet().Usage = func() { printUsage(set.FlagSet(), cmd) }
	return set, s
}

// check refuses values no run could use; the caller exits 2.
func (s *settings) check() error {
	var errs []error
	if s.minAge != nil && *s.minAge < 0 {
		errs = append(errs, fmt.Errorf("--min-age %s is negative", *s.minAge))
	}
	if s.batchSize != nil && (*s.batchSize < 1 || *s.batchSize > reconcile.MaxBatchSize) {
		errs = append(errs, fmt.Errorf("--batch-size %d not in [1, %d]", *s.batchSize, reconcile.MaxBatchSize))
	}
	if *s.breakerFailures < 1 {
		errs = append(errs, fmt.Errorf("PROVIDER_BREAKER_FAILURES %d is not positive", *s.breakerFailures))
	}
	if s.day != nil {
		if *s.day == "" {
			errs = append(errs, errors.New("--day YYYY-MM-DD is required"))
		} else if _, err := reconcile.ParseDay(*s.day); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *settings) config() reconcile.Config {
	c := reconcile.Config{
		Payments: payments.Config{
			LockTTL: *s.lockTTL, KeyTTL: *s.keyTTL, CallTimeout: *s.callTimeout,
			RetryBudget: *s.retryBudget, BreakerCooldown: *s.breakerCooldown,
		},
	}
	if s.minAge != nil {
		c.MinAge = *s.minAge
	}
	if s.batchSize != nil {
		c.BatchSize = *s.batchSize
		c.Workers = min(reconcile.DefaultWorkers, c.BatchSize)
	}
	return c
}

func (s *settings) providerConfig() provider.Config {
	return provider.Config{
		CallTimeout: *s.callTimeout, RetryBudget: *s.retryBudget,
		BreakerFailures: uint32(*s.breakerFailures), BreakerCooldown: *s.breakerCooldown,
	}
}

const commandsUsage = `Usage: reconciler [run|settle|gc] [flags]

A one-shot job, run from cron, that makes the payments database and the
provider agree. Prints one JSON line on stdout; logs JSON to stderr.

Commands:
  run      (default) resolve CREATED, PENDING and UNKNOWN attempts older than
           --min-age that are due for a check; prints
           {"checked","succeeded","failed","still_unknown","needs_review","errors"}
  settle   --day YYYY-MM-DD: compare the provider's charges of that UTC day with
           our payments and refund orphan charges; prints
           {"day","provider_charges","matched","orphans_refunded","amount_mismatches","missing_at_provider"}
  gc       delete expired idempotency keys of final payments; prints {"deleted"}

Exit status: 0 the job ran, 1 it could not run (database or provider
unreachable, invalid configuration), 2 bad usage.

Run "reconciler COMMAND -h" for a command's flags. Every flag can also be set
by the environment variable named after it (--database-url ⇔ DATABASE_URL).
`

// printUsage prints the commands and cmd's flags like flag.PrintDefaults,
// except that the defaults of secret settings are hidden.
func printUsage(fs *flag.FlagSet, cmd string) {
	out := fs.Output()
	fmt.Fprint(out, commandsUsage)
	fmt.Fprintf(out, "\nFlags of %q:\n", cmd)
	secret := map[string]bool{}
	for _, env := range secretEnvs {
		secret[envflag.FlagName(env)] = true
	}
	fs.VisitAll(func(f *flag.Flag) {
		def := fmt.Sprintf(" (default %q)", f.DefValue)
		switch {
		case secret[f.Name]:
			def = " (default hidden)"
		case f.DefValue == "" || f.DefValue == "0s":
			def = ""
		}
		kind, text := flag.UnquoteUsage(f)
		fmt.Fprintf(out, "  --%s %s\n    \t%s%s\n", f.Name, kind, text, def)
	})
}

// topUsage answers "reconciler -h" and an unknown command.
func topUsage(w io.Writer, getenv func(string) (string, bool)) {
	set, _ := newFlags("run", getenv)
	set.FlagSet().SetOutput(w)
	set.FlagSet().Usage()
}
