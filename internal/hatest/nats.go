package hatest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATS is a JetStream cluster of nats-server processes on this machine.
type NATS struct {
	Servers []*NATSServer

	t    testing.TB
	g    *Guard
	base string
	bin  string
}

// NATSServer is one server of the cluster.
type NATSServer struct {
	Name        string
	ClientPort  int
	ClusterPort int
	HTTPPort    int // monitoring: /healthz

	n    *NATS
	mu   sync.Mutex
	proc *proc
}

// StartNATS starts a cluster of size servers with JetStream and waits until
// every one reports healthy on /healthz. It is stopped and its directory
// removed when t ends.
func StartNATS(t testing.TB, g *Guard, size int) *NATS {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		bin = "/usr/sbin/nats-server"
		if _, serr := os.Stat(bin); serr != nil {
			t.Fatalf("hatest: nats-server not found (apt-get install nats-server): %v", err)
		}
	}
	base, err := os.MkdirTemp("", "hatest-nats-")
	if err != nil {
		t.Fatal(err)
	}
	c := &NATS{t: t, g: g, base: base, bin: bin}
	g.removeDir(base)
	ports := FreePorts(t, 3*size)
	for i := range size {
		c.Servers = append(c.Servers, &NATSServer{
			Name: fmt.Sprintf("n%d", i+1), ClientPort: ports[3*i], ClusterPort: ports[3*i+1], HTTPPort: ports[3*i+2], n: c,
		})
	}
	t.Cleanup(c.stop)
	for _, s := range c.Servers {
		if err := os.WriteFile(s.configPath(), []byte(c.config(s)), 0o644); err != nil {
			t.Fatal(err)
		}
		s.start()
	}
	c.WaitHealthy(time.Minute)
	return c
}

func (c *NATS) config(s *NATSServer) string {
	var routes []string
	for _, o := range c.Servers {
		if o != s {
			routes = append(routes, fmt.Sprintf("%q", fmt.Sprintf("nats-route://127.0.0.1:%d", o.ClusterPort)))
		}
	}
	return fmt.Sprintf(`server_name: %q
host: "127.0.0.1"
port: %d
http: "127.0.0.1:%d"
jetstream {
  store_dir: %q
  max_memory_store: 64MB
  max_file_store: 1GB
}
cluster {
  name: "hatest"
  host: "127.0.0.1"
  port: %d
  routes: [%s]
}
`, s.Name, s.ClientPort, s.HTTPPort, filepath.Join(c.base, s.Name), s.ClusterPort, strings.Join(routes, ", "))
}

func (s *NATSServer) configPath() string { return filepath.Join(s.n.base, s.Name+".conf") }
func (s *NATSServer) logPath() string    { return filepath.Join(s.n.base, s.Name+".log") }

// URL is the client URL of this server.
func (s *NATSServer) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.ClientPort) }

// URL lists every server, comma-separated, as NATS_URL takes it.
func (c *NATS) URL() string {
	urls := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		urls[i] = s.URL()
	}
	return strings.Join(urls, ",")
}

func (s *NATSServer) start() {
	s.n.t.Helper()
	p, err := s.n.g.start(s.Name, s.logPath(), runAs{env: os.Environ()}, s.n.bin, "-c", s.configPath())
	if err != nil {
		s.n.t.Fatal(err)
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
}

// Kill SIGKILLs the server.
func (s *NATSServer) Kill() {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	p.kill()
}

// Restart starts a killed server again on the same ports and store.
func (s *NATSServer) Restart() { s.start() }

// Healthy reports whether the server answers 200 on /healthz (it does once
// JetStream is up and current with the cluster).
func (s *NATSServer) Healthy() bool {
	cl := http.Client{Timeout: time.Second}
	resp, err := cl.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", s.HTTPPort))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// WaitHealthy waits until every server is healthy.
func (c *NATS) WaitHealthy(timeout time.Duration) {
	c.t.Helper()
	c.waitFor(timeout, "every NATS server healthy", func() bool {
		for _, s := range c.Servers {
			if !s.Healthy() {
				return false
			}
		}
		return true
	})
}

func (c *NATS) waitFor(timeout time.Duration, what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("hatest: not within %s: %s\n%s", timeout, what, c.logTails())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Server returns the server named name.
func (c *NATS) Server(name string) *NATSServer {
	for _, s := range c.Servers {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Connect returns a JetStream client of the cluster, closed when the test ends.
func (c *NATS) Connect() (*nats.Conn, jetstream.JetStream) {
	c.t.Helper()
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond))
	if err != nil {
		c.t.Fatalf("hatest: connect to NATS: %v", err)
	}
	c.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatal(err)
	}
	return nc, js
}

// StreamCluster returns the stream's leader and replicas as its current
// leader reports them.
func StreamCluster(ctx context.Context, js jetstream.JetStream, stream string) (*jetstream.ClusterInfo, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	info := s.CachedInfo()
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return nil, errors.New("no leader")
	}
	return info.Cluster, nil
}

// WaitStreamHealthy waits until the stream has a leader other than
// notLeader (if given) and every replica is current and online; it returns
// the leader's name.
func (c *NATS) WaitStreamHealthy(timeout time.Duration, js jetstream.JetStream, stream, notLeader string) string {
	c.t.Helper()
	var leader string
	c.waitFor(timeout, "stream "+stream+" led and replicated", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ci, err := StreamCluster(ctx, js, stream)
		if err != nil || ci.Leader == notLeader {
			return false
		}
		for _, r := range ci.Replicas {
			if !r.Current || r.Offline {
				return false
			}
		}
		leader = ci.Leader
		return true
	})
	return leader
}

// WaitStreamLeader waits until the stream has a leader other than notLeader
// and returns its name; replicas may still be catching up.
func (c *NATS) WaitStreamLeader(timeout time.Duration, js jetstream.JetStream, stream, notLeader string) string {
	c.t.Helper()
	var leader string
	c.waitFor(timeout, "stream "+stream+" led by another server than "+notLeader, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ci, err := StreamCluster(ctx, js, stream)
		if err != nil || ci.Leader == notLeader {
			return false
		}
		leader = ci.Leader
		return true
	})
	return leader
}

// stop ends every server (SIGTERM, so JetStream flushes its store) and
// removes the directory.
func (c *NATS) stop() {
	if c.t.Failed() {
		c.t.Logf("hatest: nats logs:\n%s", c.logTails())
	}
	var wg sync.WaitGroup
	for _, s := range c.Servers {
		s.mu.Lock()
		p := s.proc
		s.mu.Unlock()
		if p != nil {
			wg.Go(func() { p.interrupt(syscall.SIGTERM, 10*time.Second) })
		}
	}
	wg.Wait()
	c.g.removeOrKeep(c.t, c.base)
}

func (c *NATS) logTails() string {
	var b strings.Builder
	for _, s := range c.Servers {
		fmt.Fprintf(&b, "--- %s ---\n%s\n", s.Name, tailFile(s.logPath(), 2000))
	}
	return b.String()
}
