package testkit

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
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

// NATSServer is a private nats-server process (with JetStream) for tests
// that stop and restart NATS, or that must not share the streams of the
// common server (NATSURL); its port and store survive restarts.
type NATSServer struct {
	t    testing.TB
	bin  string
	host string
	port string
	dir  string
	URL  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	out    SyncBuffer
}

// NewNATSServer reserves a port (ReservedAddr: nobody else gets it
// while the test runs, however often the server stops and starts) and a
// store directory for a server that is not started yet, so a test can point
// a relay at NATS before it exists.
func NewNATSServer(t testing.TB) *NATSServer {
	t.Helper()
	host, port, err := net.SplitHostPort(ReservedAddr(t))
	require.NoError(t, err)
	s := &NATSServer{t: t, bin: natsServerBin(t), host: host, port: port, dir: t.TempDir()}
	s.URL = "nats://" + net.JoinHostPort(host, port)
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("nats-server output:\n%s", s.out.String())
		}
	})
	return s
}

// StartNATSServer starts a private server and waits until JetStream answers.
func StartNATSServer(t testing.TB) *NATSServer {
	t.Helper()
	s := NewNATSServer(t)
	s.Start()
	return s
}

// Start runs the server and waits until it serves JetStream requests.
func (s *NATSServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	running := s.cmd != nil
	s.mu.Unlock()
	require.False(s.t, running, "nats-server already running")
	cmd := exec.Command(s.bin, "-a", s.host, "-p", s.port, "-js", "-sd", s.dir)
	cmd.Stdout, cmd.Stderr = &s.out, &s.out
	require.NoError(s.t, cmd.Start(), "start %s", s.bin)
	s.mu.Lock()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()

	Eventually(s.t, 15*time.Second, "nats-server on port "+s.port+" serves JetStream", func() bool {
		select {
		case <-exited:
			require.FailNow(s.t, "nats-server exited at start", "%s", s.out.String())
		default:
		}
		return s.probe() == nil
	})
}

// probe reports whether the server answers JetStream API requests.
func (s *NATSServer) probe() error {
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

// Stop shuts the server down gracefully (SIGTERM), so that the messages it
// acknowledged are on disk when it restarts, and waits for it to exit
// (killing it after 15s). It does not touch t, so that a relay's hook may
// call it from the relay's goroutine.
func (s *NATSServer) Stop() {
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
		<-exited // a killed process is reaped at once
	}
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers (a server's output
// goroutines, a logger) and readers.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
