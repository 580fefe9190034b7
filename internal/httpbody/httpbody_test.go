package httpbody

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

const limit = 1 << 10

// server answers 200 with the body's length, or 413 when Read refuses it.
func server(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := Read(r, limit)
		switch {
		case errors.Is(err, ErrTooLarge):
			w.WriteHeader(http.StatusRequestEntityTooLarge)
		case err != nil:
			w.WriteHeader(http.StatusBadRequest)
		default:
			_, _ = io.WriteString(w, strconv.Itoa(len(body)))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// post sends n bytes (chunked when chunked is set) and returns the status,
// the answer and whether the connection was a reused one.
func post(t *testing.T, srv *httptest.Server, n int, chunked bool) (int, string, bool) {
	t.Helper()
	var body io.Reader = bytes.NewReader(bytes.Repeat([]byte("x"), n))
	if chunked {
		body = io.MultiReader(body) // unknown length: sent chunked
	}
	var reused bool
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
	req, err := http.NewRequest(http.MethodPost, srv.URL, body)
	require.NoError(t, err)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := srv.Client().Do(req)
	require.NoError(t, err, "POST of %d bytes (chunked %v)", n, chunked)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(raw), reused
}

func TestReadWithinTheLimit(t *testing.T) {
	srv := server(t)
	for _, chunked := range []bool{false, true} {
		for _, n := range []int{0, 1, limit} {
			status, got, _ := post(t, srv, n, chunked)
			require.Equal(t, http.StatusOK, status, "%d bytes (chunked %v)", n, chunked)
			require.Equal(t, strconv.Itoa(n), got, "bytes read")
		}
	}
}

// A body over the limit is answered 413 on a connection that stays usable,
// however often it happens: the sender never sees a reset connection.
func TestOverTheLimitIsAnsweredNotReset(t *testing.T) {
	srv := server(t)
	for _, chunked := range []bool{false, true} {
		for i, n := range []int{limit + 1, 300 << 10, DrainBytes} {
			for round := range 20 {
				status, _, reused := post(t, srv, n, chunked)
				require.Equal(t, http.StatusRequestEntityTooLarge, status, "%d bytes (chunked %v)", n, chunked)
				if i > 0 || round > 0 {
					require.True(t, reused, "the connection was kept after a drained 413 (%d bytes, chunked %v)", n, chunked)
				}
			}
		}
	}
	// And a body within the limit still goes through on the same connection.
	status, got, reused := post(t, srv, limit, false)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, strconv.Itoa(limit), got)
	require.True(t, reused, "connection reused")
}

// A declared length beyond the drain bound is refused without reading it:
// the server answers and closes the connection.
func TestDeclaredHugeBodyIsNotRead(t *testing.T) {
	var read atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		counted := &countingReader{ReadCloser: r.Body}
		r.Body = counted
		if _, err := Read(r, limit); !errors.Is(err, ErrTooLarge) {
			w.WriteHeader(http.StatusOK)
			return
		}
		read.Store(counted.n)
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
	}))
	t.Cleanup(srv.Close)
	// The client declares the length but never sends the body: the answer
	// must come without the server waiting for it.
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	req, err := http.NewRequest(http.MethodPost, srv.URL, pr)
	require.NoError(t, err)
	req.ContentLength = DrainBytes + 1
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.Zero(t, read.Load(), "bytes of the body read")
}

type countingReader struct {
	io.ReadCloser
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n += int64(n)
	return n, err
}
