package testkit

import (
	"errors"
	"net"
	"net/url"
	"sync"
	"testing"
)

// TCPProxy forwards TCP connections from a port of its own to a target
// address, and can take the target away in the two ways a network does:
//
//   - Cut closes every forwarded connection and refuses new ones until
//     Restore, as a crashed process or a rebooted host does: the client sees
//     its connections reset at once.
//   - Blackhole stops forwarding in both directions while every connection
//     stays open (no FIN, no RST), as a partition or a frozen host does:
//     whatever either side sends is held, new connections are accepted and
//     held too, and the client learns nothing until its own deadlines pass.
//     Heal forwards again, what was held included (TCP retransmitting after
//     the partition); HealNewConnections forwards only connections opened
//     from then on, and the ones held stay silent until they are closed
//     (packets lost for good).
//
// To a process configured with the proxy's address the target goes away and
// comes back, while the target itself is untouched.
type TCPProxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	changed *sync.Cond // broadcast on every change of the fields below
	cut     bool
	black   bool
	closed  bool
	links   map[*link]struct{}
	wg      sync.WaitGroup
}

// link is one client connection and its connection to the target.
type link struct {
	client, server net.Conn // server is nil until dialled
	abandoned      bool     // held by HealNewConnections: never forwards again
	closed         bool
}

// StartTCPProxy listens on 127.0.0.1:0 and forwards every connection to
// target ("host:port"). It stops when t ends.
func StartTCPProxy(t testing.TB, target string) *TCPProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testkit: proxy listen: %v", err)
	}
	p := &TCPProxy{ln: ln, target: target, links: map[*link]struct{}{}}
	p.changed = sync.NewCond(&p.mu)
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
		t.Fatalf("testkit: proxy URL: %v", err)
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
	for l := range p.links {
		p.closeLink(l)
	}
	p.changed.Broadcast()
}

// Restore accepts and forwards new connections again after Cut.
func (p *TCPProxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Blackhole stops forwarding anything, keeping every connection open.
func (p *TCPProxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.black = true
}

// Heal ends a Blackhole: every connection forwards again, and what was
// held is delivered.
func (p *TCPProxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.black = false
	p.changed.Broadcast()
}

// HealNewConnections ends a Blackhole for connections accepted from now on;
// those open now never forward another byte.
func (p *TCPProxy) HealNewConnections() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.links {
		l.abandoned = true
	}
	p.black = false
	p.changed.Broadcast()
}

// Close stops the proxy and closes every connection.
func (p *TCPProxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for l := range p.links {
		p.closeLink(l)
	}
	p.changed.Broadcast()
	p.mu.Unlock()
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
		l := &link{client: client}
		if !p.track(l) {
			_ = client.Close()
			continue
		}
		p.wg.Go(func() { p.forward(l) })
	}
}

// track registers l unless the proxy is cut or closed.
func (p *TCPProxy) track(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut || p.closed {
		return false
	}
	p.links[l] = struct{}{}
	return true
}

// closeLink closes both of l's connections; p.mu is held.
func (p *TCPProxy) closeLink(l *link) {
	l.closed = true
	_ = l.client.Close()
	if l.server != nil {
		_ = l.server.Close()
	}
}

func (p *TCPProxy) untrack(l *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLink(l)
	delete(p.links, l)
	p.changed.Broadcast()
}

// pass waits until l may forward (no blackhole, not abandoned) and reports
// whether it still may: false once l or the proxy is closed.
func (p *TCPProxy) pass(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !l.closed && !p.closed && (p.black || l.abandoned) {
		p.changed.Wait()
	}
	return !l.closed && !p.closed
}

// forward copies both ways between l's client and a new connection to the
// target until either side ends or the proxy closes them.
func (p *TCPProxy) forward(l *link) {
	defer p.untrack(l)
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	l.server = server
	if l.closed { // cut or closed while dialling
		_ = server.Close()
	}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		defer func() { done <- struct{}{} }()
		// Not io.Copy: every chunk waits at pass, so that a blackhole
		// holds it.
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if !p.pass(l) {
					return
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				// An end is held like data: a blackholed side never sees
				// the other one go.
				if !p.pass(l) {
					return
				}
				break
			}
		}
		// Either direction ending ends both: a half-closed database
		// connection is of no use to anyone.
		p.untrack(l)
	}
	go pipe(server, l.client)
	go pipe(l.client, server)
	<-done
	<-done
}
