package db

import (
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// keepAliveInterval is the time between TCP keepalive probes of an idle
// connection once the first one went unanswered.
const keepAliveInterval = time.Second

// dialFunc is the dial of every connection of a pool (and of the outbox
// relay's LISTEN session, which copies the pool's settings): connectTimeout
// bounds the TCP connect, and the kernel itself gives up on a connection
// whose peer went silent, which no statement deadline can see on an idle
// connection:
//
//   - keepalive probes start after timeout of silence (every
//     keepAliveInterval), so an idle connection whose server vanished (a
//     partition, a frozen host) is found dead and discarded instead of
//     handed to the next request;
//   - TCP_USER_TIMEOUT (Linux) closes a connection whose sent data (a
//     statement, a probe) stays unacknowledged for timeout, instead of
//     retransmitting for the 15 minutes of the kernel's default.
//
// Unix sockets take none of this.
func dialFunc(connectTimeout, timeout time.Duration) pgconn.DialFunc {
	d := &net.Dialer{
		Timeout: connectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: timeout, Interval: keepAliveInterval,
			Count: max(1, int(timeout/keepAliveInterval)),
		},
		Control: func(network, _ string, c syscall.RawConn) error {
			if network != "tcp" && network != "tcp4" && network != "tcp6" {
				return nil
			}
			var serr error
			if err := c.Control(func(fd uintptr) { serr = setUserTimeout(fd, timeout) }); err != nil {
				return err
			}
			return serr
		},
	}
	return d.DialContext
}
