package outbox

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsServerFallback is where Debian's nats-server package installs it,
// outside a normal user's PATH.
const natsServerFallback = "/usr/sbin/nats-server"

// natsServerBin finds nats-server on PATH, then at natsServerFallback. Without
// one, the test fails with what to install when the CI variable is set (.ci/run
// sets it: CI never skips silently), and is skipped on a developer's machine.
func natsServerBin(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	if _, err := os.Stat(natsServerFallback); err == nil {
		return natsServerFallback
	}
	const msg = "nats-server not found on PATH or at " + natsServerFallback + ": install it (apt-get install nats-server)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg + "; skipped because CI is unset")
	return ""
}

// natsServer is a private nats-server process for tests that stop and
// restart NATS; its port and JetStream store survive restarts.
type natsServer struct {
	t    testing.TB
	bin  string
	port int
	dir  string
	URL  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	out    syncBuffer
}

// newNATSServer reserves a port and a store directory for a server that is
// not started yet, so a test can point a relay at NATS before it exists.
func newNATSServer(t testing.TB) *natsServer {
	t.Helper()
	s := &natsServer{t: t, bin: natsServerBin(t), port: freePort(t), dir: t.TempDir()}
	s.URL = fmt.Sprintf("nats://127.0.0.1:%d", s.port)
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("nats-server output:\n%s", s.out.String())
		}
	})
	return s
}

// startNATSServer starts a private server and waits until JetStream answers.
func startNATSServer(t testing.TB) *natsServer {
	t.Helper()
	s := newNATSServer(t)
	s.start()
	return s
}

// start runs the server and waits until it serves JetStream requests.
func (s *natsServer) start() {
	s.t.Helper()
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		s.t.Fatal("nats-server already running")
	}
	cmd := exec.Command(s.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", s.dir)
	cmd.Stdout, cmd.Stderr = &s.out, &s.out
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		s.t.Fatalf("start %s: %v", s.bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()

	deadline := time.After(15 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := s.probe()
		if err == nil {
			return
		}
		select {
		case <-exited:
			s.t.Fatalf("nats-server exited at start: %v\n%s", err, s.out.String())
		case <-deadline:
			s.t.Fatalf("nats-server on port %d not ready: %v", s.port, err)
		case <-tick.C:
		}
	}
}

// probe reports whether the server answers JetStream API requests.
func (s *natsServer) probe() error {
	nc, err := nats.Connect(s.URL, nats.Timeout(time.Second), nats.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// stop shuts the server down gracefully (SIGTERM), so that the messages it
// acknowledged are on disk when it restarts, and waits for it to exit.
func (s *natsServer) stop() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// syncBuffer is a bytes.Buffer safe for the server's output goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
