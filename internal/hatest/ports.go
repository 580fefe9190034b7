package hatest

import (
	"net"
	"testing"
)

// FreePorts returns n distinct TCP ports of 127.0.0.1 that were free a
// moment ago. The listeners are all open at once, so the ports differ.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("hatest: free port: %v", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
