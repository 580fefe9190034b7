package testkit

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRandomID(t *testing.T) {
	t.Parallel()
	a, b := RandomID("pay_"), RandomID("pay_")
	require.True(t, strings.HasPrefix(a, "pay_"), a)
	require.Len(t, a, len("pay_")+12)
	require.NotEqual(t, a, b)
}

// A reserved port refuses connections, is never handed out by the kernel
// for port 0, and can be bound (again and again) by the test itself.
func TestReservedAddr(t *testing.T) {
	t.Parallel()
	addr := ReservedAddr(t)
	_, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.True(t, errors.Is(err, syscall.ECONNREFUSED), "dial %s: %v", addr, err)

	for range 2 {
		ln, err := net.Listen("tcp", addr)
		require.NoError(t, err, "the test binds its reserved port")
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		require.NoError(t, err)
		require.NoError(t, c.Close())
		require.NoError(t, ln.Close())
		_, err = net.DialTimeout("tcp", addr, 5*time.Second)
		require.True(t, errors.Is(err, syscall.ECONNREFUSED), "refused again once the listener is gone: %v", err)
	}
	for range 2000 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		got := ln.Addr().String()
		require.NoError(t, ln.Close())
		require.NotEqual(t, addr, got, "port 0 never gets the reserved port")
	}
}

func TestEventually(t *testing.T) {
	t.Parallel()
	n := 0
	Eventually(t, 10*time.Second, "the third call", func() bool { n++; return n == 3 })
	require.Equal(t, 3, n)
}
