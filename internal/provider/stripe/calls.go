package stripe

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	sdk "github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/form"

	"github.com/acme/paymentsvc/internal/provider"
)

// codeAuthenticationRequired is the failure code of a payment whose card
// asked for the customer (requires_action): not supported, canceled.
const codeAuthenticationRequired = "authentication_required"

// PostCharge creates and confirms one PaymentIntent (off-session card,
// capture_method automatic or manual, metadata[psvc_payment]) under the
// request's idempotency key, and maps its answer (docs/providers.md).
func (c *Client) PostCharge(ctx context.Context, req provider.ChargeRequest) (provider.Charge, error) {
	p := &sdk.PaymentIntentCreateParams{
		Amount: sdk.Int64(req.Amount), Currency: sdk.String(strings.ToLower(req.Currency)),
		PaymentMethod: sdk.String(req.PaymentMethod), Confirm: sdk.Bool(true), OffSession: sdk.Bool(true),
		PaymentMethodTypes: []*string{sdk.String("card")}, CaptureMethod: sdk.String("automatic"),
	}
	want := provider.ChargeSucceeded
	if req.Manual {
		p.CaptureMethod, want = sdk.String("manual"), provider.ChargeAuthorized
	}
	p.AddMetadata(MetaPayment, req.Reference)
	p.AddExpand("latest_charge")
	p.SetIdempotencyKey(req.IdempotencyKey)
	pi, se, err := call(ctx, provider.OpCharge, func(ctx context.Context) (*sdk.PaymentIntent, error) {
		return c.sc.V1PaymentIntents.Create(ctx, p)
	})
	if err != nil {
		return c.chargeRefused(ctx, req, se, err)
	}
	return c.charged(ctx, req, pi, want)
}

// charged decides a PaymentIntent answered for req.
func (c *Client) charged(ctx context.Context, req provider.ChargeRequest, pi *sdk.PaymentIntent, want string) (provider.Charge, error) {
	if pi.ID == "" || pi.Metadata[MetaPayment] != req.Reference {
		return provider.Charge{}, bad(provider.OpCharge, "answer without our PaymentIntent")
	}
	ch := charge(pi)
	switch {
	case ch.Status == want:
		return ch, nil
	case ch.Status == provider.ChargeFailed:
		return provider.Charge{}, declined(ch, ch.FailureCode)
	case pi.Status == sdk.PaymentIntentStatusRequiresAction:
		// The card needs the customer, which an off-session payment cannot
		// have: cancel it so it never completes, then it is a decline.
		if err := c.cancelUnsupported(ctx, req, pi.ID); err != nil {
			return provider.Charge{}, err
		}
		ch.Status, ch.FailureCode = provider.ChargeFailed, codeAuthenticationRequired
		return provider.Charge{}, declined(ch, codeAuthenticationRequired)
	case !settled(ch):
		return provider.Charge{}, unsettled(provider.OpCharge, ch)
	}
	return provider.Charge{}, bad(provider.OpCharge, "PaymentIntent "+pi.ID+" is "+string(pi.Status)+", not "+want)
}

// cancelUnsupported cancels a PaymentIntent that needs the customer, under
// a key of its own derived from the charge's.
func (c *Client) cancelUnsupported(ctx context.Context, req provider.ChargeRequest, id string) error {
	p := &sdk.PaymentIntentCancelParams{CancellationReason: sdk.String(string(sdk.PaymentIntentCancellationReasonAbandoned))}
	p.SetIdempotencyKey(req.IdempotencyKey + "_cancel")
	pi, se, err := call(ctx, provider.OpCharge, func(ctx context.Context) (*sdk.PaymentIntent, error) {
		return c.sc.V1PaymentIntents.Cancel(ctx, id, p)
	})
	if err == nil && pi.Status == sdk.PaymentIntentStatusCanceled {
		return nil
	}
	if se != nil && se.PaymentIntent != nil && se.PaymentIntent.Status == sdk.PaymentIntentStatusCanceled {
		return nil // canceled already
	}
	if err == nil {
		err = bad(provider.OpCharge, "PaymentIntent "+id+" not canceled: "+string(pi.Status))
	}
	return err
}

func declined(ch provider.Charge, code string) error {
	return &provider.CallError{Op: provider.OpCharge, Kind: provider.KindDeclined, Sent: true, Status: http.StatusPaymentRequired, Code: code, Charge: &ch}
}

// chargeRefused decides a create's error answer: a card error is a decline;
// idempotency_error, 409, 429 and 5xx stay as they are (Resilient retries
// or gives up: Unknown); any other 4xx is decided by the PaymentIntent the
// error carries, if it is ours, and is otherwise not a proof of anything.
func (c *Client) chargeRefused(ctx context.Context, req provider.ChargeRequest, se *sdk.Error, err error) (provider.Charge, error) {
	if se == nil {
		return provider.Charge{}, err
	}
	if se.HTTPStatusCode == http.StatusPaymentRequired && se.Type == sdk.ErrorTypeCard {
		ch := provider.Charge{Amount: req.Amount, Currency: req.Currency, Reference: req.Reference, Status: provider.ChargeFailed,
			PaymentMethod: req.PaymentMethod, FailureCode: failureCode(se, "card_declined")}
		if se.PaymentIntent != nil {
			ch.ID, ch.Created = se.PaymentIntent.ID, se.PaymentIntent.Created
		}
		return provider.Charge{}, declined(ch, ch.FailureCode)
	}
	if se.HTTPStatusCode >= 500 || se.HTTPStatusCode == http.StatusConflict || se.HTTPStatusCode == http.StatusTooManyRequests ||
		(se.Type == sdk.ErrorTypeIdempotency && se.HTTPStatusCode == http.StatusBadRequest) || se.HTTPStatusCode < 400 {
		return provider.Charge{}, err
	}
	// Another 4xx: only the object decides. The PaymentIntent an error
	// carries (payment_intent_unexpected_state) is read as it is.
	if pi := se.PaymentIntent; pi != nil && pi.ID != "" && pi.Metadata[MetaPayment] == req.Reference {
		want := provider.ChargeSucceeded
		if req.Manual {
			want = provider.ChargeAuthorized
		}
		full, _, rerr := call(ctx, provider.OpCharge, func(ctx context.Context) (*sdk.PaymentIntent, error) {
			p := &sdk.PaymentIntentRetrieveParams{}
			p.AddExpand("latest_charge")
			return c.sc.V1PaymentIntents.Retrieve(ctx, pi.ID, p)
		})
		if rerr != nil {
			return provider.Charge{}, err
		}
		return c.charged(ctx, req, full, want)
	}
	ce := err.(*provider.CallError)
	if ce.Retry == nil {
		ce.Retry = boolp(false)
	}
	if rejection(se) {
		// Stripe refused the request itself (an unknown payment method:
		// resource_missing): read back whether a PaymentIntent of ours
		// exists all the same. One that does decides; none is a rejection
		// (Resilient and the service decide whether it proves nothing
		// was made); a read-back that fails proves nothing.
		found, ferr := c.FindCharge(ctx, provider.Lookup{Reference: req.Reference, Since: time.Now().Add(-lookupSlack)})
		switch {
		case ferr == nil:
			want := provider.ChargeSucceeded
			if req.Manual {
				want = provider.ChargeAuthorized
			}
			full, rerr := c.retrieve(ctx, found.ID)
			if rerr != nil {
				return provider.Charge{}, ce
			}
			return c.charged(ctx, req, full, want)
		case errors.Is(ferr, provider.ErrNotFound):
			code := failureCode(se, codeInvalidRequest)
			ch := provider.Charge{Amount: req.Amount, Currency: req.Currency, Reference: req.Reference, Status: provider.ChargeFailed,
				PaymentMethod: req.PaymentMethod, FailureCode: code}
			rej := declined(ch, code).(*provider.CallError)
			rej.Status, rej.Rejected, rej.Err = se.HTTPStatusCode, true, se
			return provider.Charge{}, rej
		}
	}
	return provider.Charge{}, ce
}

// codeInvalidRequest is the failure code of a request Stripe refused
// without a code of its own.
const codeInvalidRequest = "invalid_request"

// rejection reports whether se is Stripe refusing the request itself: a
// 400 or 404 invalid_request_error (an idempotency_error is of another
// type) that Stripe does not say to retry.
func rejection(se *sdk.Error) bool {
	if se.Type != sdk.ErrorTypeInvalidRequest || (se.HTTPStatusCode != http.StatusBadRequest && se.HTTPStatusCode != http.StatusNotFound) {
		return false
	}
	return se.LastResponse == nil || se.LastResponse.Header.Get("Stripe-Should-Retry") != "true"
}

// GetCharge reads a PaymentIntent by id, with its latest charge.
func (c *Client) GetCharge(ctx context.Context, id string) (provider.Charge, error) {
	if id == "" {
		return provider.Charge{}, provider.ErrEmptyKey
	}
	pi, err := c.retrieve(ctx, id)
	if err != nil {
		return provider.Charge{}, err
	}
	return charge(pi), nil
}

func (c *Client) retrieve(ctx context.Context, id string) (*sdk.PaymentIntent, error) {
	p := &sdk.PaymentIntentRetrieveParams{}
	p.AddExpand("latest_charge")
	pi, _, err := call(ctx, provider.OpLookup, func(ctx context.Context) (*sdk.PaymentIntent, error) {
		return c.sc.V1PaymentIntents.Retrieve(ctx, id, p)
	})
	if err != nil {
		return nil, err
	}
	if pi.ID != id {
		return nil, bad(provider.OpLookup, "answer without the PaymentIntent asked for")
	}
	return pi, nil
}

// FindCharge finds a payment's PaymentIntent exactly: by its id when the
// service has it, else by listing the PaymentIntents created around the
// payment and matching metadata[psvc_payment] (a list reads its writes;
// Stripe's search lags, so it is never used).
func (c *Client) FindCharge(ctx context.Context, l provider.Lookup) (provider.Charge, error) {
	if l.Reference == "" {
		return provider.Charge{}, provider.ErrEmptyKey
	}
	if l.ChargeID != "" {
		pi, err := c.retrieve(ctx, l.ChargeID)
		if err != nil {
			return provider.Charge{}, err
		}
		if pi.Metadata[MetaPayment] != l.Reference {
			return provider.Charge{}, bad(provider.OpLookup, "PaymentIntent "+pi.ID+" is not of payment "+l.Reference)
		}
		return charge(pi), nil
	}
	from := l.Since.Add(-lookupSlack)
	to := l.Since.Add(KeyWindow + 2*lookupSlack)
	after := ""
	for {
		page, err := c.listPage(ctx, provider.OpLookup, provider.ListQuery{From: from, To: to, After: after, Limit: 100})
		if err != nil {
			return provider.Charge{}, err
		}
		for _, pi := range page.Data {
			if pi.Metadata[MetaPayment] == l.Reference {
				return charge(pi), nil
			}
		}
		if !page.HasMore {
			return provider.Charge{}, notFound(provider.OpLookup, "no PaymentIntent of payment "+l.Reference)
		}
		after = page.Data[len(page.Data)-1].ID
	}
}

type piPage struct {
	Data    []*sdk.PaymentIntent
	HasMore bool
}

// listPage makes one GET /v1/payment_intents?created[gte]=&created[lt]=.
func (c *Client) listPage(ctx context.Context, op string, q provider.ListQuery) (piPage, error) {
	p := &sdk.PaymentIntentListParams{CreatedRange: &sdk.RangeQueryParams{GreaterThanOrEqual: ceilUnix(q.From), LesserThan: ceilUnix(q.To)}}
	if q.Limit > 0 {
		p.Limit = sdk.Int64(int64(min(q.Limit, 100)))
	} else {
		p.Limit = sdk.Int64(100)
	}
	if q.After != "" {
		p.StartingAfter = sdk.String(q.After)
	}
	list, se, err := call(ctx, op, func(ctx context.Context) (*sdk.PaymentIntentList, error) {
		var list sdk.PaymentIntentList
		return &list, c.get(ctx, "/v1/payment_intents", p, &list)
	})
	if err != nil {
		var ce *provider.CallError
		if errors.As(err, &ce) && errors.Is(err, provider.ErrNotFound) {
			// A list is never "not found": a 404 here proves nothing
			// about the PaymentIntents (FindCharge says not found itself).
			ce.Err = se
		}
		return piPage{}, err
	}
	if list.HasMore && len(list.Data) == 0 {
		return piPage{}, bad(op, "has_more without data")
	}
	return piPage{Data: list.Data, HasMore: list.HasMore}, nil
}

// ListCharges returns one page of the PaymentIntents created in [q.From,
// q.To) (Stripe lists newest first; settlement reads every page, so the
// order does not matter). One without metadata[psvc_payment] is Foreign.
func (c *Client) ListCharges(ctx context.Context, q provider.ListQuery) (provider.ChargePage, error) {
	page, err := c.listPage(ctx, provider.OpList, q)
	if err != nil {
		return provider.ChargePage{}, err
	}
	out := provider.ChargePage{Data: make([]provider.Charge, 0, len(page.Data)), HasMore: page.HasMore}
	for _, pi := range page.Data {
		out.Data = append(out.Data, charge(pi))
	}
	return out, nil
}

// stripeRefundReasons are the refund reasons Stripe takes; others are only
// kept in metadata[psvc_reason].
var stripeRefundReasons = map[string]bool{"duplicate": true, "fraudulent": true, "requested_by_customer": true}

// PostRefund makes one Refund of the PaymentIntent req.ChargeID.
func (c *Client) PostRefund(ctx context.Context, req provider.RefundRequest) (provider.Refund, error) {
	if req.ChargeID == "" {
		return provider.Refund{}, &provider.CallError{Op: provider.OpRefund, Kind: provider.KindTransport, Err: errors.New("no charge to refund")}
	}
	p := &sdk.RefundCreateParams{PaymentIntent: sdk.String(req.ChargeID)}
	if req.Amount > 0 {
		p.Amount = sdk.Int64(req.Amount)
	}
	if stripeRefundReasons[req.Reason] {
		p.Reason = sdk.String(req.Reason)
	}
	if req.Reference != "" {
		p.AddMetadata(MetaRefund, req.Reference)
	}
	if req.Reason != "" {
		p.AddMetadata(MetaReason, req.Reason)
	}
	p.SetIdempotencyKey(req.IdempotencyKey)
	re, se, err := call(ctx, provider.OpRefund, func(ctx context.Context) (*sdk.Refund, error) {
		return c.sc.V1Refunds.Create(ctx, p)
	})
	if err != nil {
		return c.refundRefused(ctx, req, se, err)
	}
	return refundAnswered(req, re)
}

// refundAnswered decides the Refund Stripe answered for req.
func refundAnswered(req provider.RefundRequest, re *sdk.Refund) (provider.Refund, error) {
	out := refund(re, req.ChargeID)
	if out.ID == "" || (req.Amount > 0 && out.Amount != req.Amount) || (req.Reference != "" && out.Reference != req.Reference) {
		return provider.Refund{}, bad(provider.OpRefund, "answer without our refund of our PaymentIntent")
	}
	if re.Status == sdk.RefundStatusFailed || re.Status == sdk.RefundStatusCanceled {
		return provider.Refund{}, &provider.CallError{Op: provider.OpRefund, Kind: provider.KindDeclined, Sent: true, Status: http.StatusOK,
			Code: "provider_refund_failed"}
	}
	return out, nil
}

// refundRefused decides a refund's error answer. A 400 is decided by
// reading the PaymentIntent's refunds back (metadata[psvc_refund]): a
// refund of ours found is the answer; none found makes a refusal code that
// proves nothing was refunded (amount_too_large, charge_already_refunded…)
// a decline, and any other invalid_request_error a rejection (Resilient
// and the service decide whether it proves nothing was made). Anything
// else, or a read-back that fails, stays as it is.
func (c *Client) refundRefused(ctx context.Context, req provider.RefundRequest, se *sdk.Error, err error) (provider.Refund, error) {
	ce, ok := err.(*provider.CallError)
	if se == nil || !ok || se.HTTPStatusCode != http.StatusBadRequest || !rejection(se) {
		return provider.Refund{}, err
	}
	var found provider.Refund
	ferr := provider.ErrNotFound
	if req.Reference != "" {
		found, ferr = c.FindRefund(ctx, provider.Lookup{ChargeID: req.ChargeID, Reference: req.Reference})
	}
	switch {
	case ferr == nil:
		if found.Status != provider.RefundSucceeded {
			return provider.Refund{}, &provider.CallError{Op: provider.OpRefund, Kind: provider.KindDeclined, Sent: true, Status: http.StatusOK,
				Code: "provider_refund_failed"}
		}
		if req.Amount > 0 && found.Amount != req.Amount {
			return provider.Refund{}, bad(provider.OpRefund, "refund "+found.ID+" of "+req.Reference+" is of another amount")
		}
		return found, nil
	case !errors.Is(ferr, provider.ErrNotFound):
		return provider.Refund{}, err
	}
	ce.Kind = provider.KindDeclined
	if !provider.IsRefundRefusal(string(se.Code)) {
		ce.Code, ce.Rejected = failureCode(se, codeInvalidRequest), true
	}
	return provider.Refund{}, ce
}

// refund maps a Stripe Refund; pending counts as succeeded (Stripe accepted
// it; a later failure arrives as refund.failed).
func refund(re *sdk.Refund, pi string) provider.Refund {
	out := provider.Refund{ID: re.ID, Charge: pi, Amount: re.Amount, Reference: re.Metadata[MetaRefund], Created: re.Created, Status: string(re.Status)}
	if re.PaymentIntent != nil && re.PaymentIntent.ID != "" {
		out.Charge = re.PaymentIntent.ID
	}
	switch re.Status {
	case sdk.RefundStatusSucceeded, sdk.RefundStatusPending:
		out.Status = provider.RefundSucceeded
	}
	return out
}

// FindRefund lists the refunds of the PaymentIntent l.ChargeID and matches
// metadata[psvc_refund].
func (c *Client) FindRefund(ctx context.Context, l provider.Lookup) (provider.Refund, error) {
	if l.ChargeID == "" || l.Reference == "" {
		return provider.Refund{}, provider.ErrEmptyKey
	}
	after := ""
	for {
		p := &sdk.RefundListParams{PaymentIntent: sdk.String(l.ChargeID)}
		p.Limit = sdk.Int64(100)
		if after != "" {
			p.StartingAfter = sdk.String(after)
		}
		list, _, err := call(ctx, provider.OpLookup, func(ctx context.Context) (*sdk.RefundList, error) {
			var list sdk.RefundList
			return &list, c.get(ctx, "/v1/refunds", p, &list)
		})
		if err != nil {
			return provider.Refund{}, err
		}
		for _, re := range list.Data {
			if re.Metadata[MetaRefund] == l.Reference {
				return refund(re, l.ChargeID), nil
			}
		}
		if !list.HasMore || len(list.Data) == 0 {
			return provider.Refund{}, notFound(provider.OpLookup, "no refund "+l.Reference+" of "+l.ChargeID)
		}
		after = list.Data[len(list.Data)-1].ID
	}
}

// PostCapture captures the PaymentIntent req.ChargeID (amount_to_capture;
// the rest is released), writing the capture's key in its metadata so a
// later read tells whose capture it was.
func (c *Client) PostCapture(ctx context.Context, req provider.CaptureRequest) (provider.Charge, error) {
	if req.ChargeID == "" {
		return provider.Charge{}, &provider.CallError{Op: provider.OpCapture, Kind: provider.KindTransport, Err: errors.New("no charge to capture")}
	}
	p := &sdk.PaymentIntentCaptureParams{}
	if req.Amount > 0 {
		p.AmountToCapture = sdk.Int64(req.Amount)
	}
	p.AddMetadata(MetaCaptureKey, req.IdempotencyKey)
	p.AddExpand("latest_charge")
	p.SetIdempotencyKey(req.IdempotencyKey)
	pi, se, err := call(ctx, provider.OpCapture, func(ctx context.Context) (*sdk.PaymentIntent, error) {
		return c.sc.V1PaymentIntents.Capture(ctx, req.ChargeID, p)
	})
	if err != nil {
		return provider.Charge{}, holdRefused(provider.OpCapture, se, err)
	}
	ch := charge(pi)
	if ch.ID != req.ChargeID || ch.Status != provider.ChargeSucceeded || (req.Amount > 0 && ch.CapturedAmount() != req.Amount) {
		if !settled(ch) {
			return provider.Charge{}, unsettled(provider.OpCapture, ch)
		}
		return provider.Charge{}, bad(provider.OpCapture, "answer without our PaymentIntent captured")
	}
	return ch, nil
}

// stripeCancelReasons are the cancellation reasons Stripe takes.
var stripeCancelReasons = map[string]bool{"duplicate": true, "fraudulent": true, "requested_by_customer": true, "abandoned": true}

// PostVoid cancels the PaymentIntent req.ChargeID (cancellation_reason =
// the void's reason when Stripe takes it).
func (c *Client) PostVoid(ctx context.Context, req provider.VoidRequest) (provider.Charge, error) {
	if req.ChargeID == "" {
		return provider.Charge{}, &provider.CallError{Op: provider.OpVoid, Kind: provider.KindTransport, Err: errors.New("no charge to void")}
	}
	p := &sdk.PaymentIntentCancelParams{}
	if stripeCancelReasons[req.Reason] {
		p.CancellationReason = sdk.String(req.Reason)
	}
	p.SetIdempotencyKey(req.IdempotencyKey)
	pi, se, err := call(ctx, provider.OpVoid, func(ctx context.Context) (*sdk.PaymentIntent, error) {
		return c.sc.V1PaymentIntents.Cancel(ctx, req.ChargeID, p)
	})
	if err != nil {
		return provider.Charge{}, holdRefused(provider.OpVoid, se, err)
	}
	ch := charge(pi)
	if ch.ID != req.ChargeID || ch.Status != provider.ChargeVoided {
		return provider.Charge{}, bad(provider.OpVoid, "answer without our PaymentIntent canceled")
	}
	ch.VoidKey = req.IdempotencyKey
	return ch, nil
}

// holdRefused maps a capture's or void's error answer: a code that proves
// nothing was done is a decline (the service then reads the charge back);
// payment_intent_unexpected_state is decided by the PaymentIntent it
// carries; anything else stays as it is.
func holdRefused(op string, se *sdk.Error, err error) error {
	if se == nil || se.HTTPStatusCode != http.StatusBadRequest {
		return err
	}
	ce := err.(*provider.CallError)
	code := string(se.Code)
	if se.Code == sdk.ErrorCodePaymentIntentUnexpectedState && se.PaymentIntent != nil {
		switch ch := charge(se.PaymentIntent); ch.Status {
		case provider.ChargeSucceeded:
			code = provider.CodeChargeAlreadyCaptured
		case provider.ChargeExpired:
			code = provider.CodeAuthorizationExpired
		case provider.ChargeVoided:
			code = provider.CodeChargeNotCapturable
		}
	}
	if provider.IsHoldRefusal(code) {
		ce.Kind, ce.Code = provider.KindDeclined, code
	}
	return ce
}

// FindCapture reads the PaymentIntent back: captured under l.Key (its
// metadata says so) is the capture found.
func (c *Client) FindCapture(ctx context.Context, l provider.Lookup) (provider.Hold, error) {
	if l.ChargeID == "" {
		return provider.Hold{}, provider.ErrEmptyKey
	}
	pi, err := c.retrieve(ctx, l.ChargeID)
	if err != nil {
		return provider.Hold{}, err
	}
	if pi.Status != sdk.PaymentIntentStatusSucceeded || pi.Metadata[MetaCaptureKey] != l.Key {
		return provider.Hold{}, notFound(provider.OpLookup, "PaymentIntent "+pi.ID+" not captured by "+l.Reference)
	}
	return provider.Hold{Charge: pi.ID, Amount: pi.AmountReceived, Reference: l.Reference, IdempotencyKey: l.Key}, nil
}

// FindVoid reads the PaymentIntent back: canceled, and not by Stripe itself
// (automatic: the authorization expired), is the void found.
func (c *Client) FindVoid(ctx context.Context, l provider.Lookup) (provider.Hold, error) {
	if l.ChargeID == "" {
		return provider.Hold{}, provider.ErrEmptyKey
	}
	pi, err := c.retrieve(ctx, l.ChargeID)
	if err != nil {
		return provider.Hold{}, err
	}
	if pi.Status != sdk.PaymentIntentStatusCanceled || pi.CancellationReason == sdk.PaymentIntentCancellationReasonAutomatic {
		return provider.Hold{}, notFound(provider.OpLookup, "PaymentIntent "+pi.ID+" not canceled by "+l.Reference)
	}
	return provider.Hold{Charge: pi.ID, Reference: l.Reference, IdempotencyKey: l.Key}, nil
}

// get makes one GET of a list page (the SDK's iterators would fetch every
// page in one call; settlement wants one page per call).
func (c *Client) get(ctx context.Context, path string, p sdk.ListParamsContainer, v sdk.LastResponseSetter) error {
	var q form.Values
	form.AppendTo(&q, p)
	return c.api.CallRaw(http.MethodGet, path, c.key, []byte(q.Encode()), &sdk.Params{Context: ctx}, v)
}
