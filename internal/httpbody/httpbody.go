// Package httpbody reads a request body up to a limit and refuses a larger
// one in a way the sender can actually see.
//
// http.MaxBytesReader stops reading at the limit and marks the connection to
// be closed; a sender still writing the rest of its body then often gets
// "connection reset by peer" instead of the 413 it was sent. Read instead
// reads one byte past the limit to notice the overrun and then reads and
// drops a bounded remainder (DrainBytes), so a body moderately over the limit
// is answered cleanly on a connection that stays usable. Only a body larger
// than the drain bound is left unread, and the server closes that connection.
package httpbody

import (
	"errors"
	"io"
	"net/http"
)

// DrainBytes is how much of a too-large body is read and dropped before
// answering, so the sender sees the answer rather than a reset connection.
const DrainBytes = 1 << 20

// ErrTooLarge is returned when the body is longer than the limit.
var ErrTooLarge = errors.New("request body too large")

// Read returns the body of r if it is at most limit bytes. A longer body
// gives ErrTooLarge after at most limit+1+DrainBytes bytes were read; a
// declared Content-Length over the limit is refused without buffering.
func Read(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		drain(r, r.ContentLength)
		return nil, ErrTooLarge
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		drain(r, -1)
		return nil, ErrTooLarge
	}
	return body, nil
}

// drain reads and drops what is left of a refused body, up to DrainBytes
// (declared is the Content-Length, -1 when unknown; a declared remainder
// over the bound is not read at all). Whatever is left after that is the
// server's to deal with: it closes the connection after the answer.
func drain(r *http.Request, declared int64) {
	if declared > DrainBytes {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, DrainBytes))
}
