package client

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"net/url"
)

// CreateRefund refunds req.Amount (the whole refundable rest when nil) of
// the SUCCEEDED payment paymentID under the idempotency key, retrying until
// the refund is final, and returns it: SUCCEEDED, or FAILED (the provider
// refused; FailureCode says why). The key rules of CreatePayment apply:
// one key per refund intent, stored before the first try and reused, with
// the same req, on every later call for it. Payments and refunds share the
// tenant's key space.
//
// Errors: ErrMissingKey; a *Problem for CodePaymentNotFound,
// CodePaymentNotRefundable, CodeRefundExceedsRefundable,
// CodeIdempotencyKeyReused, …; a *NotFinalError with the key and the last
// known refund when the deadline passes first.
func (c *Client) CreateRefund(ctx context.Context, paymentID, key string, req CreateRefundRequest) (*Refund, error) {
	return createOn(ctx, c, paymentID, "refunds", key, req, func(e *NotFinalError, r *Refund) { e.Refund = r },
		func(r *Refund) Status { return r.Status })
}

// GetRefund returns the refund with id. Errors: a *Problem with
// CodeRefundNotFound; a *NotFinalError when no answer came before the deadline.
func (c *Client) GetRefund(ctx context.Context, id string) (*Refund, error) {
	return c.getRefund(ctx, id, false)
}

// SyncRefund is GetRefund that first asks the provider about a PENDING or
// UNKNOWN refund and applies what it learns (GET ?sync=true).
func (c *Client) SyncRefund(ctx context.Context, id string) (*Refund, error) {
	return c.getRefund(ctx, id, true)
}

func (c *Client) getRefund(ctx context.Context, id string, sync bool) (*Refund, error) {
	if id == "" {
		return nil, errors.New("paymentsvc: empty refund id")
	}
	cl := &call{method: http.MethodGet, path: "/v1/refunds/" + url.PathEscape(id)}
	if sync {
		cl.query = url.Values{"sync": {"true"}}
	}
	return get[Refund](ctx, c, cl)
}

// ListRefundsPage returns one page of the payment's refunds, newest first.
// Errors: a *Problem with CodePaymentNotFound.
func (c *Client) ListRefundsPage(ctx context.Context, paymentID string, params ListRefundsParams) (*RefundList, error) {
	if paymentID == "" {
		return nil, errors.New("paymentsvc: empty payment id")
	}
	return get[RefundList](ctx, c, &call{
		method: http.MethodGet, path: "/v1/payments/" + url.PathEscape(paymentID) + "/refunds", query: queryOf(params),
	})
}

// ListRefunds iterates over the payment's refunds, newest first, page after
// page (params.Limit a page, 100 when 0). An error ends the iteration after
// being yielded with a nil refund.
func (c *Client) ListRefunds(ctx context.Context, paymentID string, params ListRefundsParams) iter.Seq2[*Refund, error] {
	if params.Limit == 0 {
		params.Limit = 100
	}
	return paginate(func(after string) ([]Refund, bool, error) {
		page := params // a copy: ranging again starts from params, not from the last cursor
		if after != "" {
			page.StartingAfter = after
		}
		list, err := c.ListRefundsPage(ctx, paymentID, page)
		if err != nil {
			return nil, false, err
		}
		return list.Data, list.HasMore, nil
	}, func(r *Refund) string { return r.ID })
}
