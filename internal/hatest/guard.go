package hatest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// guardEnv marks the test binary re-executed as a guard.
const guardEnv = "HATEST_GUARD"

// RunGuardIfAsked turns the process into a guard when the test binary was
// re-executed as one, and never returns then. Call it first in TestMain of
// every package that uses this one.
func RunGuardIfAsked() {
	if os.Getenv(guardEnv) != "1" {
		return
	}
	runGuard(os.Stdin)
	os.Exit(0)
}

// Guard is a watchdog process that kills the processes registered with it
// once its standard input closes, which happens when the test binary exits
// however it exits. A test's own cleanup stops everything first, so
// normally the guard finds nothing left to kill.
type Guard struct {
	mu     sync.Mutex
	w      io.WriteCloser
	cmd    *exec.Cmd
	closed bool
}

// StartGuard starts the guard of t's processes; it is closed when t ends,
// after every cleanup registered later (that is, after the processes were
// stopped).
func StartGuard(t testing.TB) *Guard {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatalf("hatest: guard: %v", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), guardEnv+"=1")
	cmd.Stderr = os.Stderr
	// Its own process group: a Ctrl-C at the terminal must not take the
	// guard down with the test before the guard has done its work.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("hatest: guard: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("hatest: guard: %v", err)
	}
	g := &Guard{w: w, cmd: cmd}
	t.Cleanup(g.close)
	return g
}

func (g *Guard) send(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	_, _ = fmt.Fprintf(g.w, format+"\n", args...)
}

// Watch has the guard kill pid and its descendants if the test binary dies
// first, for processes started elsewhere (the pods and the simulator of
// internal/proctest, say).
func (g *Guard) Watch(pid int) { g.watchPID(pid) }

// watchPID has the guard kill pid's tree if the test dies. The start time
// goes with it, so that a pid reused by an unrelated process is left alone.
func (g *Guard) watchPID(pid int) {
	if _, start, err := procStat(pid); err == nil {
		g.send("pid %d %d", pid, start)
	}
}

// watchPGData has the guard kill the postmaster of pgdata if the test dies:
// it outlives a killed pg_autoctl, reparented to init.
func (g *Guard) watchPGData(pgdata string) {
	g.send("pgdata %s", pgdata)
}

// removeDir has the guard remove dir (after killing everything) if the
// test dies; keepDir cancels that, for a directory kept on purpose.
func (g *Guard) removeDir(dir string) { g.send("rmdir %s", dir) }
func (g *Guard) keepDir(dir string)   { g.send("keepdir %s", dir) }

// removeOrKeep ends a cluster's directory dir once its processes are
// stopped: removed, or kept (with its logs) if t failed and HATEST_KEEP=1.
func (g *Guard) removeOrKeep(t testing.TB, dir string) {
	if t.Failed() && os.Getenv("HATEST_KEEP") == "1" {
		g.keepDir(dir)
		t.Logf("hatest: kept %s", dir)
		return
	}
	_ = os.RemoveAll(dir)
}

// close ends the guard: it kills whatever is still registered and exits.
func (g *Guard) close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	_ = g.w.Close()
	g.mu.Unlock()
	done := make(chan struct{})
	go func() { _ = g.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = g.cmd.Process.Kill()
	}
}

// runGuard reads registrations until in closes, then kills what they name.
func runGuard(in io.Reader) {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	type watched struct {
		pid   int
		start uint64
	}
	var pids []watched
	var dirs []string
	remove := map[string]bool{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "pid":
			pid, _ := strconv.Atoi(f[1])
			start, _ := strconv.ParseUint(f[2], 10, 64)
			pids = append(pids, watched{pid, start})
		case len(f) == 2 && f[0] == "pgdata":
			dirs = append(dirs, f[1])
		case len(f) == 2 && f[0] == "rmdir":
			remove[f[1]] = true
		case len(f) == 2 && f[0] == "keepdir":
			delete(remove, f[1])
		}
	}
	killed := false
	for _, w := range pids {
		if _, start, err := procStat(w.pid); err == nil && start == w.start {
			killTree(w.pid)
			killed = true
		}
	}
	for _, dir := range dirs {
		if pid := postmasterPID(dir); pid > 0 {
			killTree(pid)
			killed = true
		}
	}
	if killed {
		time.Sleep(time.Second) // let the killed processes go before their files
	}
	if len(remove) > 0 {
		for dir := range remove {
			_ = os.RemoveAll(dir)
		}
	}
}

// postmasterPID returns the pid in pgdata's postmaster.pid if that process
// is a postgres running on pgdata, else 0.
func postmasterPID(pgdata string) int {
	b, err := os.ReadFile(filepath.Join(pgdata, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || !strings.Contains(string(cmdline), pgdata) {
		return 0
	}
	return pid
}
