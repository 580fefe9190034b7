package proctest

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
	"testing"
	"time"
)

// Process is one running binary with its captured JSON log lines.
type Process struct {
	Name string
	Addr string // from the "listening" log line

	t    testing.TB
	bin  string
	args []string
	env  []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	logs   bytes.Buffer
	done   chan struct{}
	exit   int
	exited bool
}

// StartProcess runs bin with args and env (added to a minimal environment)
// and waits for its "listening" log line. The process is killed when t ends.
func StartProcess(t testing.TB, name, bin string, args, env []string) *Process {
	t.Helper()
	p := &Process{Name: name, t: t, bin: bin, args: args, env: env}
	p.start()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("--- logs of %s ---\n%s", p.Name, p.Logs())
		}
	})
	return p
}

func (p *Process) start() {
	p.t.Helper()
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(baseEnv(), p.env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		p.t.Fatalf("%s: %v", p.Name, err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.Name, err)
	}
	listening := make(chan string, 1)
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.exited, p.exit, p.Addr = cmd, done, false, 0, ""
	p.mu.Unlock()
	go func() {
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
	}()
	select {
	case addr := <-listening:
		p.mu.Lock()
		p.Addr = addr
		p.mu.Unlock()
	case <-done:
		p.t.Fatalf("%s exited with %d before listening:\n%s", p.Name, p.ExitCode(), p.Logs())
	case <-time.After(60 * time.Second):
		p.t.Fatalf("%s did not start listening within 60s:\n%s", p.Name, p.Logs())
	}
}

// URL is the process's base URL.
func (p *Process) URL() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return "http://" + p.Addr
}

// Restart starts the same binary again (after a crash or a stop).
func (p *Process) Restart() {
	p.t.Helper()
	p.Kill()
	p.start()
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it.
func (p *Process) Kill() {
	p.mu.Lock()
	cmd, done, exited := p.cmd, p.done, p.exited
	p.mu.Unlock()
	if cmd == nil || exited {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Signal(sig)
}

// Wait waits up to timeout for the process to exit and returns its exit code.
func (p *Process) Wait(timeout time.Duration) (int, error) {
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
func (p *Process) Exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// ExitCode is the exit status once Exited (128+signal if killed by a signal).
func (p *Process) ExitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// Logs returns everything the process wrote to stderr so far.
func (p *Process) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// baseEnv is the environment passed to child processes: the parent's,
// without settings of the service that would leak into a test.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "SIM_") || strings.HasPrefix(name, "PROVIDER_") ||
			strings.HasPrefix(name, "IDEMPOTENCY_") || strings.HasPrefix(name, "PAYMENTSVC_") ||
			name == "DATABASE_URL" || name == "HTTP_ADDR" || name == "NATS_URL" || name == "OUTBOX_RELAY" ||
			name == "WEBHOOK_SECRETS" || name == "AUTO_MIGRATE" || name == "SHUTDOWN_TIMEOUT" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// Run runs bin to completion with env and returns stdout, stderr and the exit code.
func Run(ctx context.Context, bin string, args, env []string) (stdout, stderr string, code int, err error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(baseEnv(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return out.String(), errb.String(), exitErr.ExitCode(), nil
	}
	return out.String(), errb.String(), 0, err
}
