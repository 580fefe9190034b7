package client

import (
	"errors"
	"fmt"
	"strings"
)

// ErrMissingKey is returned, before anything is sent, by a create called
// with an empty idempotency key. Mint one with NewKey and store it with the
// intent first.
var ErrMissingKey = errors.New("paymentsvc: an idempotency key is required (mint one with client.NewKey and store it before the first try)")

// errNotRetried ends a call that is sent once (RotateWebhookEndpointSecret)
// whose try got no final answer.
var errNotRetried = errors.New("not retried: the call is not idempotent")

// NotFinalError is returned when a call ends before a final answer: its
// overall deadline (Config.Timeout or the context's, whichever is earlier)
// passed, or its context was cancelled, or the next retry could not begin
// before the deadline, or (a call that is sent once) its one try failed.
//
// For a create, the payment (or refund, capture, void) may exist and may
// even have been charged: nothing is lost as long as the caller resumes it
// later with the same IdempotencyKey (or reads it with SyncPayment).
// Payment, Refund, Capture or Void is the last state the service reported,
// nil if it reported none.
//
// errors.Is(err, context.DeadlineExceeded) or context.Canceled tells which
// ended it; Last is the failure of the last try (a *TransportError, a
// *Problem such as idempotency_key_in_use, or an unexpected answer), nil
// after a 202.
type NotFinalError struct {
	Op             string   // "POST /v1/payments"
	IdempotencyKey string   // the one key every try of a create carried; "" for reads
	Payment        *Payment // a create's or read's last known payment state
	Refund         *Refund  // a refund create's or read's last known state
	Capture        *Capture // a capture create's or read's last known state
	Void           *Void    // a void create's or read's last known state
	Tries          int      // HTTP requests sent
	Last           error    // why the last try did not end the call

	cause error // context.DeadlineExceeded or context.Canceled
}

func (e *NotFinalError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "paymentsvc: %s: not final after %d tries (%v)", e.Op, e.Tries, e.cause)
	switch {
	case e.Payment != nil:
		fmt.Fprintf(&b, "; payment %s is %s", e.Payment.ID, e.Payment.Status)
	case e.Refund != nil:
		fmt.Fprintf(&b, "; refund %s is %s", e.Refund.ID, e.Refund.Status)
	case e.Capture != nil:
		fmt.Fprintf(&b, "; capture %s is %s", e.Capture.ID, e.Capture.Status)
	case e.Void != nil:
		fmt.Fprintf(&b, "; void %s is %s", e.Void.ID, e.Void.Status)
	}
	if e.IdempotencyKey != "" {
		fmt.Fprintf(&b, "; resume with Idempotency-Key %q", e.IdempotencyKey)
	}
	if e.Last != nil {
		fmt.Fprintf(&b, "; last try: %v", e.Last)
	}
	return b.String()
}

// Unwrap returns the context error that ended the call and the last try's error.
func (e *NotFinalError) Unwrap() []error {
	var errs []error
	if e.cause != nil {
		errs = append(errs, e.cause)
	}
	if e.Last != nil {
		errs = append(errs, e.Last)
	}
	return errs
}

// TransportError is a try that got no HTTP answer: the connection was
// refused or reset, the try's own timeout (Config.TryTimeout) passed, or the
// answer could not be read. Such tries are always retried; the last one is
// NotFinalError.Last when the call gives up.
type TransportError struct {
	Method, URL string
	Timeout     bool  // the try's timeout passed
	Err         error // the cause; after a try's timeout, only its text, so that the call's errors.Is(err, context.DeadlineExceeded) means the call's deadline
}

func (e *TransportError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Method, e.URL, e.Err)
}

func (e *TransportError) Unwrap() error { return e.Err }

// UnexpectedAnswerError is an HTTP answer that is neither what the call
// expects nor a problem document: a proxy's error page, a body that does not
// decode. Such answers are retried.
type UnexpectedAnswerError struct {
	Method, URL string
	Status      int
	ContentType string
	Body        string // the first bytes
	Err         error  // the decoding error, if the status was expected
}

func (e *UnexpectedAnswerError) Error() string {
	s := fmt.Sprintf("%s %s: unexpected answer %d %s", e.Method, e.URL, e.Status, e.ContentType)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.Body != "" {
		s += fmt.Sprintf(": %q", e.Body)
	}
	return s
}

func (e *UnexpectedAnswerError) Unwrap() error { return e.Err }
