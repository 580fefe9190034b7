// Package childproc runs the project's binaries as child processes: it
// starts one, keeps its JSON log lines, learns its address from its
// "listening" line, and stops, kills or restarts it. The demo uses it
// directly; the tests through internal/proctest.
package childproc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StartTimeout bounds the wait for a process's "listening" line.
const StartTimeout = time.Minute

// Proc is one child process and its captured stderr.
type Proc struct {
	Name string

	bin  string
	args []string
	env  []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	addr   string
	logs   bytes.Buffer
	done   chan struct{}
	exit   int
	exited bool
}

// Start runs bin with args and env (added to Env()) and waits for its
// "listening" log line.
func Start(ctx context.Context, name, bin string, args, env []string) (*Proc, error) {
	p := &Proc{Name: name, bin: bin, args: args, env: env}
	if err := p.start(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// Restart kills the process if it still runs and starts it again with the
// same binary, arguments and environment; it listens on a new address if
// its address was port 0.
func (p *Proc) Restart(ctx context.Context) error {
	p.Kill()
	return p.start(ctx)
}

func (p *Proc) start(ctx context.Context) error {
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(Env(), p.env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	listening := make(chan string, 1)
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.exited, p.exit, p.addr = cmd, done, false, 0, ""
	p.mu.Unlock()
	go p.read(cmd, stderr, listening, done)
	select {
	case addr := <-listening:
		p.mu.Lock()
		p.addr = addr
		p.mu.Unlock()
		return nil
	case <-done:
		return fmt.Errorf("%s exited with status %d before listening:\n%s", p.Name, p.ExitCode(), p.Tail(4000))
	case <-time.After(StartTimeout):
		err = fmt.Errorf("%s did not start listening within %s:\n%s", p.Name, StartTimeout, p.Tail(4000))
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.Kill()
	return err
}

// read keeps the log lines, reports the listening address, and records the
// exit status (128+signal when killed by one) once the process ends.
func (p *Proc) read(cmd *exec.Cmd, stderr io.Reader, listening chan<- string, done chan struct{}) {
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		p.mu.Lock()
		p.logs.Write(line)
		p.logs.WriteByte('\n')
		p.mu.Unlock()
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Msg == "listening" && rec.Addr != "" {
			select {
			case listening <- rec.Addr:
			default:
			}
		}
	}
	err := cmd.Wait()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	}
	p.mu.Lock()
	p.exit, p.exited = code, true
	p.mu.Unlock()
	close(done)
}

// Addr is the address from the "listening" line.
func (p *Proc) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// Pid is the process id of the current run (0 before the first start).
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// URL is the process's base URL.
func (p *Proc) URL() string { return "http://" + p.Addr() }

// Kill ends the process with SIGKILL, as a crash would, and waits for it.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, done, exited := p.cmd, p.done, p.exited
	p.mu.Unlock()
	if cmd == nil || exited {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Stop asks the process to drain and exit (SIGTERM) and kills it if it has
// not within grace.
func (p *Proc) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = p.Signal(syscall.SIGTERM)
	if _, err := p.Wait(grace); err != nil {
		p.Kill()
	}
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Signal(sig)
}

// Wait waits up to timeout for the process to exit and returns its status.
func (p *Proc) Wait(timeout time.Duration) (int, error) {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		return p.ExitCode(), nil
	case <-time.After(timeout):
		return 0, fmt.Errorf("%s still running after %s", p.Name, timeout)
	}
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// ExitCode is the exit status once Exited (128+signal if killed by one).
func (p *Proc) ExitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// Logs returns everything the process wrote to stderr so far.
func (p *Proc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// Tail returns at most the last n bytes of the logs, for error messages.
func (p *Proc) Tail(n int) string {
	s := p.Logs()
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// Env is the environment given to child processes: this process's, without
// the services' settings, so that a developer's exported DATABASE_URL,
// PROVIDER_URL or OTEL_EXPORTER_OTLP_ENDPOINT cannot leak into processes
// configured explicitly.
func Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "SIM_") || strings.HasPrefix(name, "PROVIDER_") || strings.HasPrefix(name, "RECONCILER_") ||
			strings.HasPrefix(name, "OTEL_") || strings.HasPrefix(name, "TENANT_RATE_") || strings.HasPrefix(name, "WEBHOOK_SECRETS") ||
			strings.HasPrefix(name, "OUTBOX_") ||
			strings.HasPrefix(name, "IDEMPOTENCY_") || strings.HasPrefix(name, "PAYMENTSVC_") ||
			name == "DATABASE_URL" || name == "HTTP_ADDR" || name == "NATS_URL" ||
			name == "AUTO_MIGRATE" || name == "SHUTDOWN_TIMEOUT" ||
			name == "WEBHOOK_EVENT_TTL" || name == "SHUTDOWN_DRAIN_DELAY" ||
			name == "AUTH_CACHE_TTL" || name == "PPROF_ADDR" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// Run runs bin to completion with env and returns stdout, stderr and the
// exit status; err is set only when the process could not run.
func Run(ctx context.Context, bin string, args, env []string) (stdout, stderr string, code int, err error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(Env(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return out.String(), errb.String(), exitErr.ExitCode(), nil
	}
	return out.String(), errb.String(), 0, err
}
