package hatest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one process the harness started, with its output in a log file.
type proc struct {
	name string
	log  string // path of the file holding stdout and stderr

	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
}

// runAs says who a process runs as.
type runAs struct {
	cred *syscall.Credential // nil: as the test (root)
	env  []string            // the whole environment; nil: the test's
}

// postgresUser returns the credentials and base environment of processes
// that must not run as root (pg_autoctl refuses to). HOME and the XDG
// directories point into base, which the postgres user owns.
func postgresUser(base string, binDir string) (runAs, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return runAs{}, fmt.Errorf("user postgres: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	var groups []uint32
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.Atoi(g); err == nil {
				groups = append(groups, uint32(n))
			}
		}
	}
	return runAs{
		cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups},
		// PGHOST stays unset: sockets go to /var/run/postgresql, where the
		// packaged clients look for them.
		env: []string{
			"HOME=" + base,
			"PATH=" + binDir + ":/usr/bin:/bin:/usr/sbin:/sbin",
			"XDG_CONFIG_HOME=" + filepath.Join(base, "config"),
			"XDG_DATA_HOME=" + filepath.Join(base, "share"),
			"XDG_RUNTIME_DIR=" + filepath.Join(base, "run"),
			"LANG=C.UTF-8",
		},
	}, nil
}

// start runs args in a process group of its own, output appended to logPath,
// and registers it with g.
func (g *Guard) start(name, logPath string, as runAs, args ...string) (*proc, error) {
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = as.env
	cmd.Stdout, cmd.Stderr = out, out
	// No Pdeathsig: Linux sends it when the OS thread that forked the child
	// exits, which in Go is not the process exiting. The guard covers that.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: as.cred}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	g.watchPID(cmd.Process.Pid)
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// pid is the process's id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill SIGKILLs the process and every descendant, as a machine crash would,
// and waits until the process is reaped.
func (p *proc) kill() {
	if !p.exited() { // a reaped pid may already belong to someone else
		killTree(p.pid())
	}
	<-p.done
}

// interrupt sends sig to the process alone and waits up to grace for it to
// exit; then it kills the whole tree. It reports whether the process
// stopped by itself.
func (p *proc) interrupt(sig syscall.Signal, grace time.Duration) bool {
	if p.exited() {
		return true
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return true
	case <-time.After(grace):
		p.kill()
		return false
	}
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	if len(b) > n {
		return "…" + string(b[len(b)-n:])
	}
	return string(b)
}

// killTree SIGKILLs pid and all its descendants. The tree is read before
// anything is killed: once a parent dies its children are reparented and
// can no longer be found through it. Stopping the tree first keeps a
// supervisor (pg_autoctl) from starting replacements meanwhile.
func killTree(pid int) {
	tree := descendants(pid)
	for _, p := range tree {
		_ = syscall.Kill(p, syscall.SIGSTOP)
	}
	tree = descendants(pid) // anything forked before the stop took effect
	for _, p := range tree {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// descendants returns pid and every process below it, parents first.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, err := procStat(n); err == nil {
			children[ppid] = append(children[ppid], n)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// procStat returns a process's parent and start time (in clock ticks since
// boot, which with the pid identifies a process across pid reuse).
func procStat(pid int) (ppid int, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name is in parentheses and may hold spaces or ")".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, errors.New("malformed stat")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): ppid is field 4, starttime field 22.
	if len(f) < 20 {
		return 0, 0, errors.New("short stat")
	}
	ppid, err = strconv.Atoi(f[1])
	if err != nil {
		return 0, 0, err
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return ppid, start, err
}
