package hatest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// FastFailover are the monitor settings that make pg_auto_failover notice a
// dead node in seconds instead of the default tens of seconds (milliseconds;
// measured here: a node crash costs about 7 s of writes with them, 51 s
// without).
var FastFailover = map[string]string{
	"pgautofailover.health_check_period":               "1000",
	"pgautofailover.health_check_timeout":              "1000",
	"pgautofailover.health_check_max_retries":          "1",
	"pgautofailover.health_check_retry_delay":          "500",
	"pgautofailover.node_considered_unhealthy_timeout": "3000",
	"pgautofailover.primary_demote_timeout":            "3000",
}

// Postgres is a pg_auto_failover formation: a monitor and two data nodes,
// a primary and a synchronous standby, each run by its own pg_autoctl.
type Postgres struct {
	Nodes [2]*PGNode

	t           testing.TB
	g           *Guard
	base        string
	as          runAs
	monitorPort int
	monitor     *proc
}

// PGNode is one data node of the formation.
type PGNode struct {
	Name   string
	Port   int
	PGData string

	pg   *Postgres
	mu   sync.Mutex
	proc *proc // its pg_autoctl
}

// NodeState is one row of `pg_autoctl show state`.
type NodeState struct {
	Name     string `json:"nodename"`
	Port     int    `json:"nodeport"`
	Current  string `json:"current_group_state"`
	Assigned string `json:"assigned_group_state"`
	Health   int    `json:"health"`
}

func (s NodeState) String() string {
	return fmt.Sprintf("%s:%d %s/%s", s.Name, s.Port, s.Current, s.Assigned)
}

// StartPostgres starts a monitor and two nodes and waits until one node is
// primary and the other its secondary. Everything lives in a fresh
// directory under /tmp that the postgres user owns; it is stopped and
// removed when t ends (kept, with its logs, if t failed and HATEST_KEEP=1).
func StartPostgres(t testing.TB, g *Guard) *Postgres {
	t.Helper()
	autoctl, err := exec.LookPath("pg_autoctl")
	if err != nil {
		t.Fatalf("hatest: pg_autoctl not found (apt-get install postgresql-15-auto-failover): %v", err)
	}
	binDir := pgBinDir()
	if _, err := os.Stat(filepath.Join(binDir, "pg_ctl")); err != nil {
		t.Fatalf("hatest: no pg_ctl in %s (set PG_BINDIR): %v", binDir, err)
	}
	base, err := os.MkdirTemp("/tmp", "hatest-pg-")
	if err != nil {
		t.Fatal(err)
	}
	as, err := postgresUser(base, binDir)
	if err != nil {
		t.Fatal(err)
	}
	ports := FreePorts(t, 3)
	pg := &Postgres{t: t, g: g, base: base, as: as, monitorPort: ports[0]}
	g.removeDir(base)
	for i := range pg.Nodes {
		name := fmt.Sprintf("node%d", i+1)
		pg.Nodes[i] = &PGNode{Name: name, Port: ports[i+1], PGData: filepath.Join(base, name), pg: pg}
	}
	if err := pg.prepareDirs(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.stop)

	pg.monitor, err = g.start("monitor", pg.logPath("monitor"), as, autoctl, "create", "monitor",
		"--pgdata", pg.monitorData(), "--pgport", fmt.Sprint(pg.monitorPort),
		"--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl", "--run")
	if err != nil {
		t.Fatal(err)
	}
	g.watchPGData(pg.monitorData())
	pg.waitFor(time.Minute, "the monitor answers", func(states []NodeState, err error) bool { return err == nil })
	pg.tuneMonitor()

	// Both at once: their directories exist already, so the two pg_autoctl
	// do not race on creating them. Whichever registers first is primary.
	for _, n := range pg.Nodes {
		n.proc, err = g.start(n.Name, pg.logPath(n.Name), as, autoctl, "create", "postgres",
			"--pgdata", n.PGData, "--pgport", fmt.Sprint(n.Port), "--hostname", "127.0.0.1",
			"--name", n.Name, "--auth", "trust", "--no-ssl", "--monitor", pg.monitorURL("autoctl_node"), "--run")
		if err != nil {
			t.Fatal(err)
		}
		g.watchPGData(n.PGData)
	}
	pg.WaitHealthy(2 * time.Minute)
	return pg
}

// pgBinDir is where pg_ctl and postgres are: PG_BINDIR, or Debian's place
// for the major version pg_autoctl was built for.
func pgBinDir() string {
	if d := os.Getenv("PG_BINDIR"); d != "" {
		return d
	}
	return "/usr/lib/postgresql/15/bin"
}

// prepareDirs makes base traversable and owned by postgres, with the
// directories pg_autoctl creates for each node made in advance: two
// pg_autoctl starting together race on them ("File exists").
func (pg *Postgres) prepareDirs() error {
	if err := os.Chmod(pg.base, 0o755); err != nil {
		return err
	}
	for _, node := range []string{pg.monitorData(), pg.Nodes[0].PGData, pg.Nodes[1].PGData} {
		for _, d := range []string{"config", "share", "run"} {
			if err := os.MkdirAll(filepath.Join(pg.base, d, "pg_autoctl", node), 0o755); err != nil {
				return err
			}
		}
	}
	return filepath.Walk(pg.base, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(path, int(pg.as.cred.Uid), int(pg.as.cred.Gid))
	})
}

func (pg *Postgres) monitorData() string        { return filepath.Join(pg.base, "monitor") }
func (pg *Postgres) logPath(name string) string { return filepath.Join(pg.base, name+".log") }

func (pg *Postgres) monitorURL(user string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/pg_auto_failover?sslmode=disable", user, pg.monitorPort)
}

// URL is a multi-host URL of database name that always lands on the
// primary, the way paymentsvc is configured in production.
func (pg *Postgres) URL(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		pg.Nodes[0].Port, pg.Nodes[1].Port, name)
}

// NodeURL is the URL of database name on one node, whatever its role.
func (n *PGNode) NodeURL(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable&connect_timeout=2", n.Port, name)
}

// tuneMonitor applies FastFailover.
func (pg *Postgres) tuneMonitor() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pg.monitorURL("postgres"))
	if err != nil {
		pg.t.Fatalf("hatest: monitor: %v", err)
	}
	defer conn.Close(ctx)
	for k, v := range FastFailover {
		if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER SYSTEM SET %s = '%s'", k, v)); err != nil {
			pg.t.Fatalf("hatest: monitor: set %s: %v", k, err)
		}
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		pg.t.Fatalf("hatest: monitor: reload: %v", err)
	}
}

// autoctl runs one pg_autoctl command as postgres and returns its stdout.
func (pg *Postgres) autoctl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "pg_autoctl", args...)
	cmd.Env = pg.as.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.as.cred}
	cmd.Dir = pg.base
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("pg_autoctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// State is the formation's state as `pg_autoctl show state` reports it.
func (pg *Postgres) State() ([]NodeState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := pg.autoctl(ctx, "show", "state", "--pgdata", pg.monitorData(), "--json")
	if err != nil {
		return nil, err
	}
	var states []NodeState
	if strings.TrimSpace(out) == "" {
		return nil, nil
	}
	if err := json.Unmarshal([]byte(out), &states); err != nil {
		return nil, fmt.Errorf("pg_autoctl show state: %w: %q", err, out)
	}
	return states, nil
}

// waitFor polls State until cond holds, and fails the test after timeout.
func (pg *Postgres) waitFor(timeout time.Duration, what string, cond func([]NodeState, error) bool) []NodeState {
	pg.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		states, err := pg.State()
		if cond(states, err) {
			return states
		}
		if time.Now().After(deadline) {
			pg.t.Fatalf("hatest: not within %s: %s; last state %v (%v)\n%s", timeout, what, states, err, pg.logTails())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// WaitHealthy waits until one node is primary and the other secondary,
// both as reported and as assigned by the monitor, and returns the state.
func (pg *Postgres) WaitHealthy(timeout time.Duration) []NodeState {
	pg.t.Helper()
	return pg.waitFor(timeout, "one primary and one secondary", func(states []NodeState, err error) bool {
		return err == nil && healthy(states)
	})
}

func healthy(states []NodeState) bool {
	roles := map[string]int{}
	for _, s := range states {
		if s.Current == s.Assigned {
			roles[s.Current]++
		}
	}
	return len(states) == 2 && roles["primary"] == 1 && roles["secondary"] == 1
}

// WaitWritable waits until a node other than except accepts writes
// (primary, or wait_primary: a primary without its standby). It returns
// that node.
func (pg *Postgres) WaitWritable(timeout time.Duration, except *PGNode) *PGNode {
	pg.t.Helper()
	var found *PGNode
	pg.waitFor(timeout, "a writable node other than "+nameOf(except), func(states []NodeState, err error) bool {
		for _, s := range states {
			if err == nil && s.Current == s.Assigned && (s.Current == "primary" || s.Current == "wait_primary") &&
				(except == nil || s.Name != except.Name) {
				found = pg.node(s.Name)
				return found != nil
			}
		}
		return false
	})
	return found
}

// WaitState waits until the node's reported and assigned states are state.
func (pg *Postgres) WaitState(timeout time.Duration, n *PGNode, state string) {
	pg.t.Helper()
	pg.waitFor(timeout, n.Name+" in state "+state, func(states []NodeState, err error) bool {
		for _, s := range states {
			if err == nil && s.Name == n.Name && s.Current == state && s.Assigned == state {
				return true
			}
		}
		return false
	})
}

func nameOf(n *PGNode) string {
	if n == nil {
		return "(none)"
	}
	return n.Name
}

func (pg *Postgres) node(name string) *PGNode {
	for _, n := range pg.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Primary is the node the monitor has as primary; the formation must be
// healthy.
func (pg *Postgres) Primary() *PGNode { return pg.withRole("primary") }

// Secondary is the node the monitor has as secondary; the formation must be
// healthy.
func (pg *Postgres) Secondary() *PGNode { return pg.withRole("secondary") }

func (pg *Postgres) withRole(role string) *PGNode {
	pg.t.Helper()
	states := pg.WaitHealthy(time.Minute)
	for _, s := range states {
		if s.Current == role {
			return pg.node(s.Name)
		}
	}
	pg.t.Fatalf("hatest: no %s in %v", role, states)
	return nil
}

// Switchover asks the monitor to swap primary and secondary
// (`pg_autoctl perform switchover`, which returns once it is done) and waits
// until the formation is healthy again.
func (pg *Postgres) Switchover() {
	pg.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := pg.autoctl(ctx, "perform", "switchover", "--pgdata", pg.monitorData()); err != nil {
		pg.t.Fatalf("hatest: %v\n%s", err, pg.logTails())
	}
	pg.WaitHealthy(time.Minute)
}

// Crash SIGKILLs the node's pg_autoctl and its whole Postgres process tree,
// as a machine crash would.
func (n *PGNode) Crash() {
	n.mu.Lock()
	p := n.proc
	n.mu.Unlock()
	p.kill()
	if pid := postmasterPID(n.PGData); pid > 0 { // only if it escaped the tree
		killTree(pid)
	}
}

// Restart runs the node's pg_autoctl again after a crash; the node rejoins
// the formation (as a secondary, once it has caught up).
func (n *PGNode) Restart() {
	n.pg.t.Helper()
	p, err := n.pg.g.start(n.Name, n.pg.logPath(n.Name), n.pg.as, "pg_autoctl", "run", "--pgdata", n.PGData)
	if err != nil {
		n.pg.t.Fatal(err)
	}
	n.mu.Lock()
	n.proc = p
	n.mu.Unlock()
}

// stop shuts every node down (SIGINT asks pg_autoctl for a fast shutdown),
// kills what does not stop in time, and removes the directory.
func (pg *Postgres) stop() {
	if pg.t.Failed() {
		pg.t.Logf("hatest: postgres logs:\n%s", pg.logTails())
	}
	var wg sync.WaitGroup
	for _, n := range pg.Nodes {
		n.mu.Lock()
		p := n.proc
		n.mu.Unlock()
		if p != nil {
			wg.Go(func() { p.interrupt(syscall.SIGINT, 20*time.Second) })
		}
	}
	wg.Wait()
	if pg.monitor != nil {
		pg.monitor.interrupt(syscall.SIGINT, 20*time.Second)
	}
	for _, d := range []string{pg.Nodes[0].PGData, pg.Nodes[1].PGData, pg.monitorData()} {
		if pid := postmasterPID(d); pid > 0 {
			killTree(pid)
		}
	}
	pg.g.removeOrKeep(pg.t, pg.base)
}

// logTails returns the end of every pg_autoctl log, for failure messages.
func (pg *Postgres) logTails() string {
	var b strings.Builder
	for _, name := range []string{"monitor", pg.Nodes[0].Name, pg.Nodes[1].Name} {
		fmt.Fprintf(&b, "--- %s ---\n%s\n", name, tailFile(pg.logPath(name), 3000))
	}
	return b.String()
}
