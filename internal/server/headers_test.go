package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// headerLimit is the documented bound on a request's header block (request
// line and header fields): up to it the request is served, beyond it 431.
const headerLimit = 64 << 10

// TestRequestHeadersOver64KiBAnswer431: a header block of exactly 64 KiB is
// served and one byte more answers 431 (net/http's own slack of 4 KiB over
// MaxHeaderBytes included).
func TestRequestHeadersOver64KiBAnswer431(t *testing.T) {
	t.Parallel()
	srv, _ := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	require.Equal(t, "HTTP/1.1 200 OK", statusForHeaderBlock(t, ln.Addr().String(), headerLimit))
	require.Equal(t, "HTTP/1.1 431 Request Header Fields Too Large", statusForHeaderBlock(t, ln.Addr().String(), headerLimit+1))
	require.Equal(t, "HTTP/1.1 431 Request Header Fields Too Large", statusForHeaderBlock(t, ln.Addr().String(), headerLimit+2048))
}

// statusForHeaderBlock sends, on a raw connection, a GET whose header block
// (from the request line to the blank line) is exactly size bytes, and
// returns the status line of the answer.
func statusForHeaderBlock(t *testing.T, addr string, size int) string {
	t.Helper()
	const head, tail = "GET / HTTP/1.1\r\nHost: pod\r\nX-Padding: ", "\r\n\r\n"
	block := head + strings.Repeat("a", size-len(head)-len(tail)) + tail
	require.Len(t, block, size)
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = fmt.Fprint(conn, block)
	require.NoError(t, err)
	status, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err)
	return strings.TrimSuffix(status, "\r\n")
}
