package testkit

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// echoServer answers every line with the same line, until t ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// proxyConn is a client connection through a proxy.
type proxyConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialProxy(t *testing.T, p *TCPProxy) *proxyConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &proxyConn{t: t, c: c, r: bufio.NewReader(c)}
}

// roundTrip sends line and returns what comes back within wait, or the
// read's error.
func (pc *proxyConn) roundTrip(line string, wait time.Duration) (string, error) {
	pc.t.Helper()
	_, err := pc.c.Write([]byte(line + "\n"))
	require.NoError(pc.t, err)
	return pc.read(wait)
}

func (pc *proxyConn) read(wait time.Duration) (string, error) {
	require.NoError(pc.t, pc.c.SetReadDeadline(time.Now().Add(wait)))
	s, err := pc.r.ReadString('\n')
	return s, err
}

// silent is how long a test listens to a blackholed connection to see that
// nothing comes: any wait shows it, since nothing can come.
const silent = 300 * time.Millisecond

// A blackhole keeps connections open and silent in both directions (a read
// times out; it never ends in EOF or a reset), accepts new connections and
// holds them too; Heal delivers what was held.
func TestTCPProxyBlackholeHoldsThenHealDelivers(t *testing.T) {
	t.Parallel()
	p := StartTCPProxy(t, echoServer(t))
	old := dialProxy(t, p)
	got, err := old.roundTrip("one", 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, "one\n", got)

	p.Blackhole()
	_, err = old.roundTrip("two", silent)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "no answer and no end while blackholed")
	fresh := dialProxy(t, p)
	_, err = fresh.roundTrip("three", silent)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "a new connection is accepted and held")

	p.Heal()
	got, err = old.read(10 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "two\n", got, "what was held is delivered")
	got, err = fresh.read(10 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "three\n", got)
	got, err = old.roundTrip("four", 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, "four\n", got)
}

// HealNewConnections forwards new connections while the held ones stay
// silent for good.
func TestTCPProxyHealNewConnectionsAbandonsTheHeldOnes(t *testing.T) {
	t.Parallel()
	p := StartTCPProxy(t, echoServer(t))
	old := dialProxy(t, p)
	p.Blackhole()
	p.HealNewConnections()
	_, err := old.roundTrip("lost", silent)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "the held connection stays silent")
	fresh := dialProxy(t, p)
	got, err := fresh.roundTrip("new", 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, "new\n", got)
	_, err = old.read(silent)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "still silent")
}

// Cut resets the connections at once and refuses new ones until Restore.
func TestTCPProxyCutAndRestore(t *testing.T) {
	t.Parallel()
	p := StartTCPProxy(t, echoServer(t))
	old := dialProxy(t, p)
	_, err := old.roundTrip("one", 10*time.Second)
	require.NoError(t, err)
	p.Cut()
	_, err = old.read(10 * time.Second)
	require.Error(t, err)
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "ended, not silent: %v", err)
	refused := dialProxy(t, p)
	_, err = refused.read(10 * time.Second)
	require.Error(t, err)
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "closed at once: %v", err)
	p.Restore()
	got, err := dialProxy(t, p).roundTrip("back", 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, "back\n", got)
}
