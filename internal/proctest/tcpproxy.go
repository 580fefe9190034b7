package proctest

import (
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// TCPProxy forwards TCP connections from a port of its own to a target
// address, and can be cut and restored: to a process configured with the
// proxy's address, the target (a database, a broker) goes away and comes
// back, while the target itself is untouched.
type TCPProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// StartTCPProxy listens on 127.0.0.1:0 and forwards every connection to
// target ("host:port"). It stops when t ends.
func StartTCPProxy(t testing.TB, target string) *TCPProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proctest: proxy listen: %v", err)
	}
	p := &TCPProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's "host:port".
func (p *TCPProxy) Addr() string { return p.ln.Addr().String() }

// URL returns rawURL (a postgres:// or nats:// URL, say) pointed at the
// proxy instead of its own host and port.
func (p *TCPProxy) URL(t testing.TB, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("proctest: proxy URL: %v", err)
	}
	u.Host = p.Addr()
	return u.String()
}

// Cut closes every forwarded connection and, until Restore, closes every new
// one as soon as it is accepted: clients see their connections reset and
// new ones fail before the target says a word.
func (p *TCPProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore forwards new connections again.
func (p *TCPProxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Close stops the proxy and closes every connection.
func (p *TCPProxy) Close() {
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *TCPProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		if !p.track(client) {
			_ = client.Close()
			continue
		}
		p.wg.Go(func() { p.forward(client) })
	}
}

// track registers c unless the proxy is cut.
func (p *TCPProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *TCPProxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

// forward copies both ways between client and a new connection to the
// target until either side ends or Cut closes them.
func (p *TCPProxy) forward(client net.Conn) {
	defer p.untrack(client)
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(server) {
		_ = server.Close()
		return
	}
	defer p.untrack(server)
	defer server.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Either direction ending ends both: a half-closed database
		// connection is of no use to anyone.
		_ = dst.Close()
		_ = src.Close()
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	<-done
}
