package main

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

// proc is one child process (providersim or a paymentsvc pod) with its
// JSON log lines kept in memory, for the account of a failure.
type proc struct {
	name string
	cmd  *exec.Cmd
	addr string // from its "listening" log line
	done chan struct{}

	mu   sync.Mutex
	logs bytes.Buffer
	exit int
}

// startProc runs bin and waits until it logs that it is listening.
func startProc(ctx context.Context, name, bin string, args, env []string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(childEnv(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	listening := make(chan string, 1)
	go p.read(stderr, listening)
	select {
	case p.addr = <-listening:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s exited with status %d before listening:\n%s", name, p.exitCode(), p.tail())
	case <-time.After(time.Minute):
		err = fmt.Errorf("%s did not start listening within a minute:\n%s", name, p.tail())
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.kill()
	return nil, err
}

// read keeps the log lines, reports the listening address, and records the
// exit status once the process ends.
func (p *proc) read(stderr io.Reader, listening chan<- string) {
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
	err := p.cmd.Wait()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	}
	p.mu.Lock()
	p.exit = code
	p.mu.Unlock()
	close(p.done)
}

func (p *proc) url() string { return "http://" + p.addr }

func (p *proc) exitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// wait waits up to timeout for the process to end on its own.
func (p *proc) wait(ctx context.Context, timeout time.Duration) (int, error) {
	select {
	case <-p.done:
		return p.exitCode(), nil
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(timeout):
		return 0, fmt.Errorf("%s still running after %s", p.name, timeout)
	}
}

// stop asks the process to drain and exit (SIGTERM), and kills it if it
// has not within ten seconds.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.kill()
	}
}

// kill ends the process with SIGKILL and waits for it.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// tail is the end of the process's log, for error messages.
func (p *proc) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.logs.String()
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return s
}

// childEnv is the demo's environment without settings of the services, so
// that a developer's exported PROVIDER_URL or DATABASE_URL cannot leak into
// the processes the demo configures itself.
func childEnv() []string {
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
