package db_test

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/testdb"
)

// The pool's connections let the kernel find a silent server: keepalive
// probes after DATABASE_TIMEOUT of silence, and TCP_USER_TIMEOUT of
// DATABASE_TIMEOUT for data left unacknowledged.
func TestPoolConnectionsHaveTCPTimeouts(t *testing.T) {
	t.Parallel()
	const timeout = 7 * time.Second
	pool, err := db.Open(t.Context(), testdb.New(t).URL, db.WithTimeout(timeout))
	require.NoError(t, err)
	defer pool.Close()
	c, err := pool.Acquire(t.Context())
	require.NoError(t, err)
	defer c.Release()
	tcp, ok := c.Conn().PgConn().Conn().(*net.TCPConn)
	require.True(t, ok, "a TCP connection: %T", c.Conn().PgConn().Conn())
	raw, err := tcp.SyscallConn()
	require.NoError(t, err)
	var userTimeout, keepAlive, idle int
	var serr error
	require.NoError(t, raw.Control(func(fd uintptr) {
		if userTimeout, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT); serr != nil {
			return
		}
		if keepAlive, serr = unix.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE); serr != nil {
			return
		}
		idle, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_KEEPIDLE)
	}))
	require.NoError(t, serr)
	require.Equal(t, int(timeout.Milliseconds()), userTimeout, "TCP_USER_TIMEOUT")
	require.Equal(t, 1, keepAlive, "SO_KEEPALIVE")
	require.Equal(t, int(timeout.Seconds()), idle, "TCP_KEEPIDLE")
}
