package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
)

// CreateCapture captures req.Amount (all that is authorized when nil) of
// the AUTHORIZED payment paymentID under the idempotency key, retrying
// until the capture is final, and returns it: SUCCEEDED (the payment is
// then SUCCEEDED with AmountCaptured), or FAILED (the provider refused;
// FailureCode says why, e.g. "authorization_expired"). The key rules of
// CreatePayment apply: one key per capture intent, stored before the first
// try and reused, with the same req, on every later call for it.
//
// Errors: ErrMissingKey; a *Problem for CodePaymentNotFound,
// CodePaymentNotCapturable, CodeCaptureExceeds, CodeIdempotencyKeyReused,
// …; a *NotFinalError with the key and the last known capture when the
// deadline passes first.
func (c *Client) CreateCapture(ctx context.Context, paymentID, key string, req CreateCaptureRequest) (*Capture, error) {
	return createOn(ctx, c, paymentID, "captures", key, req, func(e *NotFinalError, v *Capture) { e.Capture = v },
		func(v *Capture) Status { return v.Status })
}

// CreateVoid voids the AUTHORIZED payment paymentID under the idempotency
// key, like CreateCapture: SUCCEEDED (the payment is then CANCELED) or
// FAILED. Errors: as CreateCapture's, with CodePaymentNotVoidable.
func (c *Client) CreateVoid(ctx context.Context, paymentID, key string, req CreateVoidRequest) (*Void, error) {
	return createOn(ctx, c, paymentID, "voids", key, req, func(e *NotFinalError, v *Void) { e.Void = v },
		func(v *Void) Status { return v.Status })
}

// createOn runs the create of an operation (what: its path segment:
// refunds, captures, voids) on payment paymentID with body req, until its
// status is final.
func createOn[T any](ctx context.Context, c *Client, paymentID, what, key string, req any, fill func(*NotFinalError, *T), status func(*T) Status) (*T, error) {
	if key == "" {
		return nil, ErrMissingKey
	}
	if paymentID == "" {
		return nil, errors.New("paymentsvc: empty payment id")
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	return create(ctx, c, &call{method: http.MethodPost, path: "/v1/payments/" + url.PathEscape(paymentID) + "/" + what, body: body, key: key},
		func(v *T) bool { return status(v).Final() }, fill)
}

// GetCapture returns the capture with id. Errors: a *Problem with
// CodeCaptureNotFound; a *NotFinalError when no answer came before the deadline.
func (c *Client) GetCapture(ctx context.Context, id string) (*Capture, error) {
	return getOne[Capture](ctx, c, "/v1/captures/", id, false)
}

// SyncCapture is GetCapture that first asks the provider about a PENDING or
// UNKNOWN capture and applies what it learns (GET ?sync=true).
func (c *Client) SyncCapture(ctx context.Context, id string) (*Capture, error) {
	return getOne[Capture](ctx, c, "/v1/captures/", id, true)
}

// GetVoid returns the void with id (CodeVoidNotFound if none).
func (c *Client) GetVoid(ctx context.Context, id string) (*Void, error) {
	return getOne[Void](ctx, c, "/v1/voids/", id, false)
}

// SyncVoid is GetVoid with ?sync=true, like SyncCapture.
func (c *Client) SyncVoid(ctx context.Context, id string) (*Void, error) {
	return getOne[Void](ctx, c, "/v1/voids/", id, true)
}

// getOne reads the object at prefix+id, asking the provider first when sync.
func getOne[T any](ctx context.Context, c *Client, prefix, id string, sync bool) (*T, error) {
	if id == "" {
		return nil, errors.New("paymentsvc: empty id")
	}
	cl := &call{method: http.MethodGet, path: prefix + url.PathEscape(id)}
	if sync {
		cl.query = url.Values{"sync": {"true"}}
	}
	return get[T](ctx, c, cl)
}
