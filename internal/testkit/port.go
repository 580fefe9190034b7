//go:build unix

package testkit

import (
	"fmt"
	"syscall"
	"testing"
)

// ReservedAddr returns a loopback address "127.0.0.1:port" whose port is
// reserved for t until it ends. Nothing listens there, so a connection to it
// is refused at once; a process the test starts may bind it explicitly (and
// so be restarted on the same port).
//
// Why the port cannot be stolen: the reservation is a socket bound to the
// port with SO_REUSEADDR that never listens, and it stays open until the
// test's cleanup. The kernel never hands a port with a bound socket to a
// bind of port 0 nor to an outgoing connection, so no other test, process
// or client gets it by chance; only an explicit bind to this very port
// (SO_REUSEADDR, as Go's and nats-server's listeners use) succeeds, and
// only the test knows the port. Binding, listening and closing a listener
// to "find a free port", as tests often do, leaves the port free for anyone
// between the close and the use.
func ReservedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("testkit: socket: %v", err)
	}
	syscall.CloseOnExec(fd) // not inherited by the processes the test starts
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		t.Fatalf("testkit: SO_REUSEADDR: %v", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("testkit: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("testkit: getsockname: %v", err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

// RefusedURL is scheme://ReservedAddr(t): a URL on which nothing listens
// while the test runs, for "the server is down" cases.
func RefusedURL(t testing.TB, scheme string) string {
	t.Helper()
	return scheme + "://" + ReservedAddr(t)
}
