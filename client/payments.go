package client

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"net/url"
)

// CreatePayment charges req under the idempotency key, retrying until the
// payment is final, and returns it: Status SUCCEEDED (charged) or FAILED
// (declined; FailureCode says why). A FAILED payment is an answer, not an
// error. A manual payment (req.CaptureMethod CaptureManual) is answered
// once AUTHORIZED (then CreateCapture or CreateVoid it), or CANCELED.
//
// key is the payment intent's one key: mint it with NewKey, store it with
// the intent before calling, and pass the same key, with the same req, on
// every later call for this intent (after a crash, a timeout or a
// *NotFinalError). Every try of this call sends it; the service charges at
// most once per key.
//
// Errors: ErrMissingKey; a *Problem for a refusal that retrying cannot
// change (e.g. CodeOrderAlreadyHasPayment, CodeIdempotencyKeyReused,
// CodeInvalidRequest, CodeUnauthorized); a *NotFinalError, carrying the key
// and the last known payment, when the deadline passes first.
func (c *Client) CreatePayment(ctx context.Context, key string, req CreatePaymentRequest) (*Payment, error) {
	if key == "" {
		return nil, ErrMissingKey
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	return create(ctx, c, &call{method: http.MethodPost, path: "/v1/payments", body: body, key: key},
		func(p *Payment) bool { return p.Status.Answered() },
		func(e *NotFinalError, p *Payment) { e.Payment = p })
}

// GetPayment returns the payment with id as the service knows it.
// Errors: a *Problem with CodePaymentNotFound; a *NotFinalError when no
// answer came before the deadline.
func (c *Client) GetPayment(ctx context.Context, id string) (*Payment, error) {
	return c.getPayment(ctx, id, false)
}

// SyncPayment is GetPayment that first asks the provider about a PENDING or
// UNKNOWN payment and applies what it learns (GET ?sync=true); of an
// AUTHORIZED one it learns a capture, void or expiry made at the provider.
// It resolves a payment without resuming its create; a payment it cannot
// resolve yet is returned as it is.
func (c *Client) SyncPayment(ctx context.Context, id string) (*Payment, error) {
	return c.getPayment(ctx, id, true)
}

func (c *Client) getPayment(ctx context.Context, id string, sync bool) (*Payment, error) {
	if id == "" {
		return nil, errors.New("paymentsvc: empty payment id")
	}
	cl := &call{method: http.MethodGet, path: "/v1/payments/" + url.PathEscape(id)}
	if sync {
		cl.query = url.Values{"sync": {"true"}}
	}
	return get[Payment](ctx, c, cl)
}

// ListPaymentsPage returns one page of the tenant's payments, newest first.
func (c *Client) ListPaymentsPage(ctx context.Context, params ListPaymentsParams) (*PaymentList, error) {
	return get[PaymentList](ctx, c, &call{method: http.MethodGet, path: "/v1/payments", query: queryOf(params)})
}

// ListPayments iterates over the tenant's payments (only params.OrderID's
// when set), newest first, page after page (params.Limit a page, 100 when
// 0), from params.StartingAfter on. An error ends the iteration after
// being yielded with a nil payment.
//
//	for p, err := range c.ListPayments(ctx, client.ListPaymentsParams{OrderID: "o-1"}) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(p.ID, p.Status)
//	}
func (c *Client) ListPayments(ctx context.Context, params ListPaymentsParams) iter.Seq2[*Payment, error] {
	if params.Limit == 0 {
		params.Limit = 100
	}
	return paginate(func(after string) ([]Payment, bool, error) {
		page := params // a copy: ranging again starts from params, not from the last cursor
		if after != "" {
			page.StartingAfter = after
		}
		list, err := c.ListPaymentsPage(ctx, page)
		if err != nil {
			return nil, false, err
		}
		return list.Data, list.HasMore, nil
	}, func(p *Payment) string { return p.ID })
}

// create runs a create (CreatePayment, CreateRefund): 201, 202 or 402 with
// a T is an answer, the last one when final says it is final; fill puts the
// last T received into a *NotFinalError.
func create[T any](ctx context.Context, c *Client, cl *call, final func(*T) bool, fill func(*NotFinalError, *T)) (*T, error) {
	var last *T
	cl.accept = func(a *answer) (bool, error) {
		v, err := decode[T](a, http.StatusCreated, http.StatusAccepted, http.StatusPaymentRequired)
		if err != nil {
			return false, err
		}
		last = v
		return final(v), nil
	}
	err := c.run(ctx, cl)
	return finish(last, err, func(e *NotFinalError) { fill(e, last) })
}

// get runs a read: 200 with a T is the answer.
func get[T any](ctx context.Context, c *Client, cl *call) (*T, error) {
	var v *T
	cl.accept = func(a *answer) (bool, error) {
		var err error
		v, err = decode[T](a, http.StatusOK)
		return err == nil, err
	}
	err := c.run(ctx, cl)
	return finish(v, err, nil)
}

// finish returns v, or nil and err; fill completes a *NotFinalError with
// the last known state.
func finish[T any](v *T, err error, fill func(*NotFinalError)) (*T, error) {
	if err == nil {
		return v, nil
	}
	if nf, ok := errors.AsType[*NotFinalError](err); ok && fill != nil {
		fill(nf)
	}
	return nil, err
}

// paginate turns page fetches into one sequence; fetch gets the ID of the
// last item yielded ("" for the first page).
func paginate[T any](fetch func(after string) ([]T, bool, error), id func(*T) string) iter.Seq2[*T, error] {
	return func(yield func(*T, error) bool) {
		after := ""
		for {
			items, more, err := fetch(after)
			if err != nil {
				yield(nil, err)
				return
			}
			for i := range items {
				if !yield(&items[i], nil) {
					return
				}
			}
			if !more || len(items) == 0 {
				return
			}
			after = id(&items[len(items)-1])
		}
	}
}
