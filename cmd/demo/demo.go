package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/childproc"
)

// Config is what the demo needs from its environment.
type Config struct {
	// DatabaseURL names the PostgreSQL server (and role) to use; the demo
	// creates its own database there and drops it at the end.
	DatabaseURL string
	// BinDir holds the paymentsvc and providersim binaries.
	BinDir string
}

// podTimings make the demo quick: the provider call timeout (2s) is above
// scenario 1's 800ms latency, so the service waits for the slow provider
// rather than retrying, and the lock TTL (4s) is a little over the shortest
// the service accepts with it (call timeout + retry budget = 3s), so
// scenario 4's retry after the lock expires comes within seconds. The
// breaker tolerates the few failed tries of scenarios 5 and 6 (a lost answer
// is tried up to 5 times within the budget, on one pod), so that every
// payment of scenario 6 shows its hop from sim_a to sim_b rather than
// skipping sim_a.
var podTimings = []string{
	"IDEMPOTENCY_LOCK_TTL=4s",
	"PROVIDER_CALL_TIMEOUT=2s",
	"PROVIDER_RETRY_BUDGET=1s",
	"PROVIDER_BREAKER_FAILURES=20",
	"PROVIDER_BREAKER_COOLDOWN=2s",
	"OUTBOX_RELAY=off",
	"SHUTDOWN_DRAIN_DELAY=0s", // no load balancer to wait for when a pod stops
}

// The providers' names, in the pods' default routing order.
const (
	providerA = "sim_a"
	providerB = "sim_b"
)

// Demo runs two providersims (providers sim_a and sim_b) and two paymentsvc
// pods on a fresh database and plays the four failure scenarios, a lost
// refund answer, a provider outage and a lost capture answer against them,
// printing an account.
type Demo struct {
	cfg Config
	out io.Writer

	admin  *pgx.ConnConfig // the server's "postgres" database
	dbName string
	dbURL  string

	stateDir   string            // sim_a's state file, so that it survives a restart
	procs      []*childproc.Proc // everything started, for Close
	sim        simulator         // sim_a, the first provider: scenarios 1 to 5 and 7 use it alone
	simB       simulator         // sim_b, the second provider
	podA, podB pod
	client     *client
}

// New returns a demo that prints to out; Run starts it, Close cleans up.
func New(cfg Config, out io.Writer) *Demo {
	return &Demo{cfg: cfg, out: out}
}

// Run starts the processes, plays the scenarios and prints the tally.
func (d *Demo) Run(ctx context.Context) error {
	if err := d.start(ctx); err != nil {
		return err
	}
	for _, play := range []func(context.Context) error{
		d.timeoutThenRetry, d.concurrentDuplicates, d.keyReused, d.crashAfterCharge, d.tally,
		d.refundAnswerLost, d.providerOutage, d.tallyProviders, d.captureAnswerLost,
	} {
		if err := play(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Close stops every process (pods first, so that none is left talking to
// the database) and drops the demo's database.
func (d *Demo) Close() error {
	for i := len(d.procs) - 1; i >= 0; i-- {
		d.procs[i].Stop(10 * time.Second)
	}
	d.procs = nil
	if d.stateDir != "" {
		_ = os.RemoveAll(d.stateDir)
		d.stateDir = ""
	}
	if d.dbName == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, d.admin)
	if err != nil {
		return fmt.Errorf("drop database %s: %w", d.dbName, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{d.dbName}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", d.dbName, err)
	}
	d.dbName = ""
	return nil
}

// start creates the database, then starts the two simulators and both pods
// and creates the tenant.
func (d *Demo) start(ctx context.Context) error {
	if err := d.createDatabase(ctx); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "paymentsvc-demo-")
	if err != nil {
		return err
	}
	d.stateDir = dir
	if d.sim, err = d.startSimA(ctx, "127.0.0.1:0"); err != nil {
		return err
	}
	p, err := d.startProc(ctx, "providersim "+providerB, "providersim", nil, []string{"SIM_ADDR=127.0.0.1:0"})
	if err != nil {
		return err
	}
	d.simB = simulator{p}
	if d.podA, err = d.startPod(ctx, "A"); err != nil {
		return err
	}
	if d.podB, err = d.startPod(ctx, "B"); err != nil {
		return err
	}
	key, err := d.createTenant(ctx)
	if err != nil {
		return err
	}
	d.client = newClient(key)
	fmt.Fprintf(d.out, "providersim %s on %s, providersim %s on %s; pod A on %s, pod B on %s; database %s\n",
		providerA, d.sim.Addr(), providerB, d.simB.Addr(), d.podA.Addr(), d.podB.Addr(), d.dbName)
	return nil
}

// startSimA runs provider sim_a on addr, with its state in a file so that a
// restart (on the same address) keeps its charges, as a real provider does.
func (d *Demo) startSimA(ctx context.Context, addr string) (simulator, error) {
	p, err := d.startProc(ctx, "providersim "+providerA, "providersim", nil, []string{
		"SIM_ADDR=" + addr, "SIM_STATE_FILE=" + filepath.Join(d.stateDir, providerA+".json"),
	})
	return simulator{p}, err
}

// createDatabase makes payments_demo_<unix>_<pid> on DatabaseURL's server.
func (d *Demo) createDatabase(ctx context.Context) error {
	u, err := url.Parse(d.cfg.DatabaseURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return fmt.Errorf("DATABASE_URL must be a postgres:// URL")
	}
	admin, err := pgx.ParseConfig(d.cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	admin.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("payments_demo_%d_%d", time.Now().Unix(), os.Getpid())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	d.admin, d.dbName = admin, name
	u.Path = "/" + name
	d.dbURL = u.String()
	return nil
}

func (d *Demo) startProc(ctx context.Context, name, bin string, args, env []string) (*childproc.Proc, error) {
	p, err := childproc.Start(ctx, name, filepath.Join(d.cfg.BinDir, bin), args, env)
	if err != nil {
		return nil, err
	}
	d.procs = append(d.procs, p)
	return p, nil
}

// startPod runs paymentsvc serve as pod name with both providers (sim_a
// first), the demo's timings and extra env.
func (d *Demo) startPod(ctx context.Context, name string, extra ...string) (pod, error) {
	env := append([]string{
		"HTTP_ADDR=127.0.0.1:0",
		"CONSOLE_ADDR=off", // pods side by side: none binds the console's default port
		"DATABASE_URL=" + d.dbURL,
		"PROVIDERS=" + providerA + "=" + d.sim.URL() + "," + providerB + "=" + d.simB.URL(),
	}, podTimings...)
	p, err := d.startProc(ctx, "pod "+name, "paymentsvc", []string{"serve"}, append(env, extra...))
	if err != nil {
		return pod{}, err
	}
	return pod{name: name, Proc: p}, nil
}

// createTenant runs `paymentsvc tenant create` and returns the API key.
func (d *Demo) createTenant(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(d.cfg.BinDir, "paymentsvc"), "tenant", "create", "--name", "demo-shop")
	cmd.Env = append(childproc.Env(), "DATABASE_URL="+d.dbURL)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("tenant create: %w\n%s", err, ee.Stderr)
		}
		return "", fmt.Errorf("tenant create: %w", err)
	}
	var t struct {
		APIKey string `json:"api_key"`
	}
	if err := json.Unmarshal(out, &t); err != nil || t.APIKey == "" {
		return "", fmt.Errorf("tenant create printed %q", out)
	}
	return t.APIKey, nil
}
