// Package stripe is the Stripe connector: a provider.Caller that speaks
// Stripe's API (PaymentIntents, Refunds) through the official SDK
// github.com/stripe/stripe-go/v82, with the SDK's own retries off so that
// provider.Resilient sees and decides every try. docs/providers.md
// ("Using Stripe") says how a provider is pointed at Stripe.
package stripe

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"

	sdk "github.com/stripe/stripe-go/v82"

	"github.com/acme/paymentsvc/internal/provider"
)

// Metadata keys the service writes on Stripe objects: the PaymentIntent of
// a payment, the Refund of a refund, and a capture's key on the
// PaymentIntent it captured.
const (
	MetaPayment    = "psvc_payment"
	MetaRefund     = "psvc_refund"
	MetaReason     = "psvc_reason"
	MetaCaptureKey = "psvc_capture_key"
)

// KeyWindow is how long after a step was first sent its POST may be sent
// again: Stripe forgets idempotency keys after 24 hours, and an hour is
// kept as a margin. Past it the service only reads.
const KeyWindow = 23 * time.Hour

// lookupSlack widens a listing by creation time around a step's creation,
// for the clocks of Stripe and of the database.
const lookupSlack = 5 * time.Minute

// Client is the connector of one provider that speaks Stripe's API. Each
// method is one logical call, bounded by its context and never retried here.
type Client struct {
	name string
	key  string
	api  sdk.Backend
	sc   *sdk.Client
}

var _ provider.Caller = (*Client)(nil)

// New returns a connector for the Stripe API at baseURL
// (https://api.stripe.com in production) with secret key apiKey; a nil
// httpClient means provider.PooledHTTP(provider.DefaultCallTimeout). The
// SDK's network retries are off and its pinned API version is sent.
func New(name, baseURL, apiKey string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = provider.PooledHTTP(provider.DefaultCallTimeout)
	}
	api := sdk.GetBackendWithConfig(sdk.APIBackend, &sdk.BackendConfig{
		URL:               sdk.String(strings.TrimRight(baseURL, "/")),
		HTTPClient:        httpClient,
		MaxNetworkRetries: sdk.Int64(0),
		LeveledLogger:     &sdk.LeveledLogger{Level: sdk.LevelNull},
	})
	backends := &sdk.Backends{API: api, Connect: api, Uploads: api, MeterEvents: api}
	return &Client{name: name, key: apiKey, api: api, sc: sdk.NewClient(apiKey, sdk.WithBackends(backends))}
}

// Name is the provider's name as stored on attempts.
func (c *Client) Name() string { return c.name }

// KeyWindow is how long after a step was first sent its POST may be
// repeated (see the constant).
func (c *Client) KeyWindow() time.Duration { return KeyWindow }

// traced returns ctx with a trace that records whether a connection was
// obtained: without one, the request provably never left.
func traced(ctx context.Context) (context.Context, *atomic.Bool) {
	var connected atomic.Bool
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { connected.Store(true) },
	}), &connected
}

// call runs one SDK call with a connection trace and turns its failure into
// a *provider.CallError (a Stripe error answer in *sdk.Error, else a
// transport error, sent when a connection was obtained).
func call[T any](ctx context.Context, op string, f func(context.Context) (T, error)) (T, *sdk.Error, error) {
	tctx, connected := traced(ctx)
	v, err := f(tctx)
	if err == nil {
		return v, nil, nil
	}
	var zero T
	var se *sdk.Error
	if errors.As(err, &se) && se.HTTPStatusCode > 0 {
		return zero, se, statusError(op, se)
	}
	return zero, nil, provider.TransportError(op, err, connected.Load())
}

// statusError is a Stripe error answer: KindStatus with its status and code
// (the decline code for a card error), Retry from Stripe-Should-Retry, and
// the anomaly idempotency_error for a key reused with other parameters
// (a 400; never retried: the same call would get the same answer; a 409
// idempotency_key_in_use is a request with our key still running, retried).
func statusError(op string, se *sdk.Error) *provider.CallError {
	ce := &provider.CallError{Op: op, Kind: provider.KindStatus, Sent: true, Status: se.HTTPStatusCode, Code: string(se.Code), Err: se}
	if se.LastResponse != nil {
		switch se.LastResponse.Header.Get("Stripe-Should-Retry") {
		case "true":
			ce.Retry = boolp(true)
		case "false":
			ce.Retry = boolp(false)
		}
	}
	if se.Type == sdk.ErrorTypeIdempotency && se.HTTPStatusCode == http.StatusBadRequest {
		ce.Code, ce.Anomaly, ce.Retry = "idempotency_error", "idempotency_error", boolp(false)
	}
	if op != provider.OpCharge && se.HTTPStatusCode == http.StatusNotFound && se.Code == sdk.ErrorCodeResourceMissing {
		ce.Err = errors.Join(provider.ErrNotFound, se)
	}
	return ce
}

func boolp(b bool) *bool { return &b }

// failureCode is a Stripe error's decline code, else its code.
func failureCode(se *sdk.Error, fallback string) string {
	switch {
	case se == nil:
		return fallback
	case se.DeclineCode != "":
		return string(se.DeclineCode)
	case se.Code != "":
		return string(se.Code)
	}
	return fallback
}

// charge maps a PaymentIntent to the provider's neutral Charge.
func charge(pi *sdk.PaymentIntent) provider.Charge {
	ch := provider.Charge{
		ID: pi.ID, Amount: pi.Amount, Currency: strings.ToUpper(string(pi.Currency)), Created: pi.Created,
		Reference: pi.Metadata[MetaPayment], AmountCaptured: pi.AmountReceived, AmountCapturable: pi.AmountCapturable,
		CaptureKey: pi.Metadata[MetaCaptureKey], Foreign: pi.Metadata[MetaPayment] == "",
	}
	if pi.PaymentMethod != nil {
		ch.PaymentMethod = pi.PaymentMethod.ID
	}
	if lc := pi.LatestCharge; lc != nil {
		ch.Refunded = lc.Refunded
		if d := lc.PaymentMethodDetails; d != nil && d.Card != nil {
			ch.CaptureBefore = d.Card.CaptureBefore
		}
	}
	switch pi.Status {
	case sdk.PaymentIntentStatusSucceeded:
		ch.Status, ch.Captured = provider.ChargeSucceeded, true
	case sdk.PaymentIntentStatusRequiresCapture:
		ch.Status = provider.ChargeAuthorized
	case sdk.PaymentIntentStatusCanceled:
		ch.Status = provider.ChargeVoided
		if pi.CancellationReason == sdk.PaymentIntentCancellationReasonAutomatic {
			ch.Status = provider.ChargeExpired
		}
	case sdk.PaymentIntentStatusRequiresPaymentMethod:
		ch.Status, ch.FailureCode = provider.ChargeFailed, failureCode(pi.LastPaymentError, "card_declined")
	default: // processing, requires_action, requires_confirmation: not settled
		ch.Status = string(pi.Status)
	}
	return ch
}

// settled reports whether a PaymentIntent's status is one the service acts
// on (succeeded, requires_capture, canceled, or failed after confirming).
func settled(ch provider.Charge) bool {
	switch ch.Status {
	case provider.ChargeSucceeded, provider.ChargeAuthorized, provider.ChargeVoided, provider.ChargeExpired, provider.ChargeFailed:
		return true
	}
	return false
}

// unsettled is the error of an answer with a PaymentIntent still moving
// (processing): the same call, made again, reads it again.
func unsettled(op string, ch provider.Charge) error {
	return &provider.CallError{Op: op, Kind: provider.KindBadResponse, Sent: true, Status: http.StatusOK, Retry: boolp(true),
		Err: errors.New("PaymentIntent " + ch.ID + " is " + ch.Status)}
}

func bad(op, why string) error {
	return &provider.CallError{Op: op, Kind: provider.KindBadResponse, Sent: true, Status: http.StatusOK, Err: errors.New(why)}
}

func notFound(op, why string) error {
	return &provider.CallError{Op: op, Kind: provider.KindStatus, Sent: true, Status: http.StatusNotFound, Code: "resource_missing",
		Err: errors.Join(provider.ErrNotFound, errors.New(why))}
}

// ceilUnix is the first whole second at or after t: created >= ceil(from)
// and created < ceil(to) is exactly [from, to) for whole-second times.
func ceilUnix(t time.Time) int64 {
	u := t.Unix()
	if t.Nanosecond() > 0 {
		u++
	}
	return u
}
