package provider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"

	"github.com/acme/paymentsvc/internal/redact"
)

// Kind says why one HTTP call to the provider gave no usable answer.
type Kind int

// The kinds of call failure.
const (
	// KindTransport: the connection failed or broke. CallError.Sent says
	// whether the request may have reached the provider.
	KindTransport Kind = iota + 1
	// KindTimeout: the call's deadline passed before the whole answer arrived.
	KindTimeout
	// KindCanceled: the caller's context was canceled during the call.
	KindCanceled
	// KindStatus: the provider answered with a status the call does not expect.
	KindStatus
	// KindDeclined: the provider refused the charge (402) and recorded it as
	// failed (CallError.Charge is that charge), or refused a refund with a
	// code that proves nothing was refunded (CallError.Code).
	KindDeclined
	// KindBadResponse: the status was expected but the body made no sense
	// (undecodable, or contradicting the status).
	KindBadResponse
)

func (k Kind) String() string {
	switch k {
	case KindTransport:
		return "transport"
	case KindTimeout:
		return "timeout"
	case KindCanceled:
		return "canceled"
	case KindStatus:
		return "http_status"
	case KindDeclined:
		return "declined"
	case KindBadResponse:
		return "bad_response"
	}
	return "invalid"
}

// CallError is the failure of one HTTP call to the provider, classified so
// the caller can decide about retries, the breaker and the charge outcome.
type CallError struct {
	Op   string // charge, lookup, list or refund
	Kind Kind
	// Sent is false only when the request provably never left this process
	// (no connection was obtained); anything later may have reached the provider.
	Sent   bool
	Status int     // HTTP status, when an answer arrived
	Code   string  // the provider's error code, when the answer carried one
	Charge *Charge // the failed charge, for KindDeclined
	Err    error   // the underlying error; ErrNotFound for a lookup's 404
	// Retry, when set, is the provider's own word on whether the same call
	// may succeed if made again (e.g. Stripe's Stripe-Should-Retry); it
	// overrides the status-code heuristics.
	Retry *bool
	// Anomaly names something a person should look at that the answer
	// shows (e.g. idempotency_error: our key was reused with other
	// parameters); Resilient passes it on in Result.Anomaly.
	Anomaly string
	// Rejected marks a KindDeclined that proves nothing was made only if no
	// earlier try of the step was ambiguous: the provider refused the
	// request itself (e.g. Stripe's 400 invalid_request_error for an
	// unknown payment method) and reading back found nothing of ours. An
	// earlier try that may have reached the provider unanswered could
	// still have made something under another answer, so Resilient makes
	// it Unknown after such a try, and the caller after such a request.
	Rejected bool
}

func (e *CallError) Error() string {
	switch e.Kind {
	case KindStatus:
		msg := fmt.Sprintf("provider %s: HTTP %d %s", e.Op, e.Status, http.StatusText(e.Status))
		if e.Code != "" {
			msg += " (" + e.Code + ")"
		}
		return msg
	case KindDeclined:
		return "provider " + e.Op + ": declined: " + e.Code
	}
	msg := "provider " + e.Op + ": " + e.Kind.String()
	if !e.Sent {
		msg += " (not sent)"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *CallError) Unwrap() error { return e.Err }

// TransportError classifies an error of the HTTP exchange itself. The
// *url.Error net/http returns quotes the request URL, which carries
// PROVIDER_URL's credentials, if any: it is masked, since call errors are
// logged.
func TransportError(op string, err error, sent bool) *CallError {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = redact.URL(ue.URL)
	}
	kind := KindTransport
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		kind = KindCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		kind = KindTimeout
	}
	return &CallError{Op: op, Kind: kind, Sent: sent, Err: err}
}
