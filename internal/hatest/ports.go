package hatest

import (
	"net"
	"strconv"
	"testing"

	"github.com/acme/paymentsvc/internal/testkit"
)

// FreePorts returns n distinct TCP ports of 127.0.0.1, each reserved for t
// until it ends (testkit.ReservedAddr): no other test, process or outgoing
// connection gets one of them by chance, while the servers the test starts
// (PostgreSQL, nats-server: both bind with SO_REUSEADDR) can bind them, and
// bind them again after a restart.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for range n {
		_, port, err := net.SplitHostPort(testkit.ReservedAddr(t))
		if err != nil {
			t.Fatalf("hatest: reserved port: %v", err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			t.Fatalf("hatest: reserved port: %v", err)
		}
		ports = append(ports, p)
	}
	return ports
}
