package db

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrUnavailable means the database could not serve a statement because it
// could not be reached or talked to: connection refused, lost or timed out,
// the server shutting down, starting or recovering, a primary demoted to a
// read-only standby. The request answers 503 and the client retries later.
// It says nothing about whether a transaction whose COMMIT failed this way
// took effect: callers never take it as "not done".
var ErrUnavailable = errors.New("database unavailable")

// IsUnavailable reports whether err, from a database call, is ErrUnavailable
// once translated.
func IsUnavailable(err error) bool {
	return errors.Is(Translate(err), ErrUnavailable)
}

// unavailable classifies a driver error; Translate wraps it in ErrUnavailable.
func unavailable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false // the caller gave up; the database may be fine
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && unavailableCode(pgErr.Code) {
		return true
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true // no connection, whatever the server said (if anything)
	}
	if pgconn.Timeout(err) || errors.Is(err, pgconn.ErrConnClosed) {
		return true // pgconn saw the deadline pass, or the connection close, mid-statement
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// A bare deadline may be anyone's (a provider call's): only pgconn's
		// mark above, or WithTx's for a connection not acquired in time, say
		// it was the database's.
		return false
	}
	// A connection that broke mid-statement surfaces as the raw network
	// error or EOF. An HTTP client's error (the provider's) is a *url.Error:
	// never the database's.
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// unavailableCode reports whether a server error means that this
// connection cannot serve us: class 08 (connection exception), 57P01
// admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now, 53300
// too_many_connections, and 25006 read_only_sql_transaction, which a
// primary demoted to a standby answers to every write.
func unavailableCode(code string) bool {
	switch code {
	case "57P01", "57P02", "57P03", "53300", "25006":
		return true
	}
	return strings.HasPrefix(code, "08")
}

// discardOnUnavailable is a pgconn OnPgError handler: it closes the
// connection (the pool then drops it) on a server error that unavailableCode
// knows, so that the next statement gets a fresh connection, which a
// multi-host DATABASE_URL with target_session_attrs=read-write points at the
// new primary. Other errors go to next (pgconn's default closes on FATAL).
func discardOnUnavailable(next pgconn.PgErrorHandler) pgconn.PgErrorHandler {
	return func(c *pgconn.PgConn, e *pgconn.PgError) bool {
		if unavailableCode(e.Code) {
			return false
		}
		if next != nil {
			return next(c, e)
		}
		return true
	}
}
