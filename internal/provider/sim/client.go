package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/acme/paymentsvc/internal/provider"
)

// maxResponseBytes bounds an answer we read; a page of charges is the
// largest one and stays far below it.
const maxResponseBytes = 32 << 20

// codeNotFound is the error code of the provider's "no such object" answer.
// Only a 404 carrying it is ErrNotFound: a bare 404 (a wrong base URL, a
// proxy) must never be read as "the charge does not exist", because the
// reconciler turns that into FAILED.
const codeNotFound = "resource_missing"

// HTTPClient is the HTTP client of a provider that speaks the simulator's
// Stripe-like API (docs/providers.md). Each method is exactly one HTTP call, bounded only by its context and never
// retried; Resilient adds timeouts, retries and the breaker. Every failure of
// a call that was attempted is a *CallError.
type HTTPClient struct {
	name    string
	baseURL string
	apiKey  string
	client  *http.Client
}

// NewHTTPClient returns a client for the provider API at baseURL that
// authenticates with apiKey; a nil httpClient means
// PooledHTTP(DefaultCallTimeout).
func NewHTTPClient(name, baseURL, apiKey string, httpClient *http.Client) *HTTPClient {
	if httpClient == nil {
		httpClient = provider.PooledHTTP(provider.DefaultCallTimeout)
	}
	return &HTTPClient{name: name, baseURL: strings.TrimRight(baseURL, "/"), apiKey: apiKey, client: httpClient}
}

// Name is the provider's name as stored on attempts.
func (s *HTTPClient) Name() string { return s.name }

// chargeBody is the body of POST /v1/charges.
type chargeBody struct {
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	PaymentMethod string `json:"payment_method"`
	Reference     string `json:"reference"`
	Capture       *bool  `json:"capture,omitempty"` // false: authorize only
}

// errorBody is the provider's error answer, and for a decline also the charge.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Charge *provider.Charge `json:"charge"`
}

// PostCharge makes one POST /v1/charges. A decline is a *CallError of
// KindDeclined carrying the failed charge.
func (s *HTTPClient) PostCharge(ctx context.Context, req provider.ChargeRequest) (provider.Charge, error) {
	body := chargeBody{Amount: req.Amount, Currency: req.Currency, PaymentMethod: req.PaymentMethod, Reference: req.Reference}
	want := provider.ChargeSucceeded
	if req.Manual {
		capture := false
		body.Capture, want = &capture, provider.ChargeAuthorized
	}
	resp, err := s.do(ctx, provider.OpCharge, http.MethodPost, "/v1/charges", nil, req.IdempotencyKey, body)
	if err != nil {
		return provider.Charge{}, err
	}
	switch resp.status {
	case http.StatusCreated:
		var ch provider.Charge
		if err := resp.decode(provider.OpCharge, &ch); err != nil {
			return provider.Charge{}, err
		}
		if ch.ID == "" || ch.Status != want || (ch.IdempotencyKey != "" && ch.IdempotencyKey != req.IdempotencyKey) {
			return provider.Charge{}, resp.bad(provider.OpCharge, "201 without a "+want+" charge for our key")
		}
		return ch, nil
	case http.StatusPaymentRequired:
		var eb errorBody
		// A 402 is a decline only with the failed charge the provider recorded;
		// anything less is an answer we do not understand, not a proof.
		if json.Unmarshal(resp.body, &eb) != nil || eb.Charge == nil || eb.Charge.ID == "" || eb.Charge.Status != provider.ChargeFailed {
			return provider.Charge{}, resp.statusError(provider.OpCharge)
		}
		code := eb.Error.Code
		if code == "" {
			code = eb.Charge.FailureCode
		}
		if code == "" {
			code = "declined"
		}
		return provider.Charge{}, &provider.CallError{Op: provider.OpCharge, Kind: provider.KindDeclined, Sent: true, Status: resp.status, Code: code, Charge: eb.Charge}
	}
	return provider.Charge{}, resp.statusError(provider.OpCharge)
}

// FindCharge makes one GET /v1/charges?idempotency_key=l.Key (the
// simulator looks everything up by our key). A 404 whose
// error code is resource_missing is a *CallError wrapping ErrNotFound.
func (s *HTTPClient) FindCharge(ctx context.Context, l provider.Lookup) (provider.Charge, error) {
	key := l.Key
	return getByKey(ctx, s, "/v1/charges", key, "charge", func(ch provider.Charge) bool {
		return ch.ID != "" && ch.IdempotencyKey == key
	})
}

// getByKey makes one GET path?idempotency_key=key and decodes the object of
// the answer; ours says whether it is the object of key (else the answer is
// KindBadResponse: "200 without the <what> of our key").
func getByKey[T any](ctx context.Context, s *HTTPClient, path, key, what string, ours func(T) bool) (T, error) {
	var zero T
	if key == "" {
		return zero, provider.ErrEmptyKey
	}
	resp, err := s.do(ctx, provider.OpLookup, http.MethodGet, path, url.Values{"idempotency_key": {key}}, "", nil)
	if err != nil {
		return zero, err
	}
	if resp.status != http.StatusOK {
		return zero, resp.statusError(provider.OpLookup)
	}
	var v T
	if err := resp.decode(provider.OpLookup, &v); err != nil {
		return zero, err
	}
	if !ours(v) {
		return zero, resp.bad(provider.OpLookup, "200 without the "+what+" of our key")
	}
	return v, nil
}

// ListCharges makes one GET /v1/charges?created_gte=&created_lt=&limit=
// (&starting_after=) for a page of the charges created in [q.From, q.To).
// A zero q.Limit asks for the whole list in one answer.
func (s *HTTPClient) ListCharges(ctx context.Context, q provider.ListQuery) (provider.ChargePage, error) {
	v := url.Values{
		"created_gte": {strconv.FormatInt(ceilUnix(q.From), 10)},
		"created_lt":  {strconv.FormatInt(ceilUnix(q.To), 10)},
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.After != "" {
		v.Set("starting_after", q.After)
	}
	resp, err := s.do(ctx, provider.OpList, http.MethodGet, "/v1/charges", v, "", nil)
	if err != nil {
		return provider.ChargePage{}, err
	}
	if resp.status != http.StatusOK {
		return provider.ChargePage{}, resp.statusError(provider.OpList)
	}
	var list struct {
		Data    *[]provider.Charge `json:"data"`
		HasMore bool               `json:"has_more"`
	}
	if err := resp.decode(provider.OpList, &list); err != nil {
		return provider.ChargePage{}, err
	}
	if list.Data == nil {
		return provider.ChargePage{}, resp.bad(provider.OpList, "200 without data")
	}
	if list.HasMore && len(*list.Data) == 0 {
		return provider.ChargePage{}, resp.bad(provider.OpList, "has_more without data")
	}
	return provider.ChargePage{Data: *list.Data, HasMore: list.HasMore}, nil
}

// refundBody is the body of POST /v1/refunds.
type refundBody struct {
	Charge    string `json:"charge"`
	Amount    int64  `json:"amount,omitempty"`
	Reference string `json:"reference,omitempty"`
}

// PostRefund makes one POST /v1/refunds. A refusal that proves nothing was
// refunded is a *CallError of KindDeclined carrying the provider's code.
func (s *HTTPClient) PostRefund(ctx context.Context, req provider.RefundRequest) (provider.Refund, error) {
	body := refundBody{Charge: req.ChargeID, Amount: req.Amount, Reference: req.Reference}
	resp, err := s.do(ctx, provider.OpRefund, http.MethodPost, "/v1/refunds", nil, req.IdempotencyKey, body)
	if err != nil {
		return provider.Refund{}, err
	}
	if resp.status != http.StatusCreated {
		return provider.Refund{}, resp.refusal(provider.OpRefund, provider.IsRefundRefusal)
	}
	var re provider.Refund
	if err := resp.decode(provider.OpRefund, &re); err != nil {
		return provider.Refund{}, err
	}
	if re.ID == "" || re.Charge != req.ChargeID || (req.Amount > 0 && re.Amount != req.Amount) ||
		(re.IdempotencyKey != "" && re.IdempotencyKey != req.IdempotencyKey) {
		return provider.Refund{}, resp.bad(provider.OpRefund, "201 without our refund of our charge")
	}
	return re, nil
}

// FindRefund makes one GET /v1/refunds?idempotency_key=key. A 404 whose
// error code is resource_missing is a *CallError wrapping ErrNotFound.
func (s *HTTPClient) FindRefund(ctx context.Context, l provider.Lookup) (provider.Refund, error) {
	key := l.Key
	return getByKey(ctx, s, "/v1/refunds", key, "refund", func(re provider.Refund) bool {
		return re.ID != "" && re.IdempotencyKey == key
	})
}

// holdBody is the body of POST /v1/charges/{id}/capture and /void.
type holdBody struct {
	Amount    int64  `json:"amount,omitempty"`
	Reference string `json:"reference,omitempty"`
}

// PostCapture makes one POST /v1/charges/{id}/capture. A refusal that
// proves nothing was captured is a *CallError of KindDeclined carrying the
// provider's code.
func (s *HTTPClient) PostCapture(ctx context.Context, req provider.CaptureRequest) (provider.Charge, error) {
	return s.postHold(ctx, provider.OpCapture, req.ChargeID, req.IdempotencyKey, holdBody{Amount: req.Amount, Reference: req.Reference},
		func(ch provider.Charge) bool {
			return ch.Status == provider.ChargeSucceeded && (req.Amount == 0 || ch.CapturedAmount() == req.Amount)
		})
}

// PostVoid makes one POST /v1/charges/{id}/void, like PostCapture. The
// simulator's API has no void reason: it is not sent.
func (s *HTTPClient) PostVoid(ctx context.Context, req provider.VoidRequest) (provider.Charge, error) {
	return s.postHold(ctx, provider.OpVoid, req.ChargeID, req.IdempotencyKey, holdBody{Reference: req.Reference},
		func(ch provider.Charge) bool { return ch.Status == provider.ChargeVoided })
}

// postHold makes one capture or void call of charge id; done says whether
// the charge answered is as the call leaves it.
func (s *HTTPClient) postHold(ctx context.Context, op, id, key string, body holdBody, done func(provider.Charge) bool) (provider.Charge, error) {
	if id == "" {
		return provider.Charge{}, &provider.CallError{Op: op, Kind: provider.KindTransport, Err: errors.New("no charge to " + op)}
	}
	resp, err := s.do(ctx, op, http.MethodPost, "/v1/charges/"+url.PathEscape(id)+"/"+op, nil, key, body)
	if err != nil {
		return provider.Charge{}, err
	}
	if resp.status != http.StatusOK {
		return provider.Charge{}, resp.refusal(op, provider.IsHoldRefusal)
	}
	var ch provider.Charge
	if err := resp.decode(op, &ch); err != nil {
		return provider.Charge{}, err
	}
	if ch.ID != id || !done(ch) {
		return provider.Charge{}, resp.bad(op, "200 without our charge "+op+"d")
	}
	return ch, nil
}

// GetCharge makes one GET /v1/charges/{id}. A 404 whose error code is
// resource_missing is a *CallError wrapping ErrNotFound.
func (s *HTTPClient) GetCharge(ctx context.Context, id string) (provider.Charge, error) {
	if id == "" {
		return provider.Charge{}, provider.ErrEmptyKey
	}
	resp, err := s.do(ctx, provider.OpLookup, http.MethodGet, "/v1/charges/"+url.PathEscape(id), nil, "", nil)
	if err != nil {
		return provider.Charge{}, err
	}
	if resp.status != http.StatusOK {
		return provider.Charge{}, resp.statusError(provider.OpLookup)
	}
	var ch provider.Charge
	if err := resp.decode(provider.OpLookup, &ch); err != nil {
		return provider.Charge{}, err
	}
	if ch.ID != id {
		return provider.Charge{}, resp.bad(provider.OpLookup, "200 without the charge asked for")
	}
	return ch, nil
}

// FindCapture makes one GET /v1/captures?idempotency_key=key.
func (s *HTTPClient) FindCapture(ctx context.Context, l provider.Lookup) (provider.Hold, error) {
	key := l.Key
	return getByKey(ctx, s, "/v1/captures", key, "capture", func(h provider.Hold) bool {
		return h.Charge != "" && h.IdempotencyKey == key
	})
}

// FindVoid makes one GET /v1/voids?idempotency_key=key.
func (s *HTTPClient) FindVoid(ctx context.Context, l provider.Lookup) (provider.Hold, error) {
	key := l.Key
	return getByKey(ctx, s, "/v1/voids", key, "void", func(h provider.Hold) bool {
		return h.Charge != "" && h.IdempotencyKey == key
	})
}

// ceilUnix is the first whole second at or after t. Charges carry whole
// seconds, so created >= ceil(from) and created < ceil(to) is exactly [from, to).
func ceilUnix(t time.Time) int64 {
	u := t.Unix()
	if t.Nanosecond() > 0 {
		u++
	}
	return u
}

// response is a whole answer, read inside the call's deadline.
type response struct {
	status int
	body   []byte
}

// do sends one request and reads the whole answer. Its errors are *CallError
// of KindTransport, KindTimeout or KindCanceled.
func (s *HTTPClient) do(ctx context.Context, op, method, path string, query url.Values, key string, in any) (response, error) {
	// GotConn is the last moment before which nothing can have been written:
	// without a connection the request provably never left.
	var connected atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { connected.Store(true) },
	})
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return response{}, &provider.CallError{Op: op, Kind: provider.KindTransport, Err: err}
		}
		body = bytes.NewReader(b)
	}
	u := s.baseURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return response{}, provider.TransportError(op, err, false)
	}
	req.Header.Set("Authorization", "Bearer "+s.apiKey)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return response{}, provider.TransportError(op, err, connected.Load())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return response{}, provider.TransportError(op, err, true)
	}
	return response{status: resp.StatusCode, body: b}, nil
}

// decode parses the body of an expected answer into v.
func (r response) decode(op string, v any) error {
	if err := json.Unmarshal(r.body, v); err != nil {
		return &provider.CallError{Op: op, Kind: provider.KindBadResponse, Sent: true, Status: r.status, Err: err}
	}
	return nil
}

func (r response) bad(op, why string) error {
	return &provider.CallError{Op: op, Kind: provider.KindBadResponse, Sent: true, Status: r.status, Err: errors.New(why)}
}

// refusal is a failed answer of a call that moves money: a 400 whose code
// is one of refusals proves nothing was done (KindDeclined); anything else
// is as statusError says.
func (r response) refusal(op string, refusal func(code string) bool) error {
	ce := r.statusError(op).(*provider.CallError)
	if r.status == http.StatusBadRequest && refusal(ce.Code) {
		ce.Kind = provider.KindDeclined
	}
	return ce
}

// statusError is an answer with a status the call does not expect.
func (r response) statusError(op string) error {
	e := &provider.CallError{Op: op, Kind: provider.KindStatus, Sent: true, Status: r.status}
	var eb errorBody
	if json.Unmarshal(r.body, &eb) == nil {
		e.Code = eb.Error.Code
	}
	// A charge call is never "not found"; a refund's 404 is about its charge.
	if op != provider.OpCharge && r.status == http.StatusNotFound && e.Code == codeNotFound {
		e.Err = provider.ErrNotFound
	}
	return e
}
