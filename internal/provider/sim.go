package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/acme/paymentsvc/internal/redact"
)

// Operation names, used in errors and as the op label of metrics.
const (
	opCharge = "charge"
	opLookup = "lookup"
	opList   = "list"
	opRefund = "refund"
)

// maxResponseBytes bounds an answer we read; a day's charge list is the
// largest one and stays far below it.
const maxResponseBytes = 32 << 20

// codeNotFound is the error code of the provider's "no such object" answer.
// Only a 404 carrying it is ErrNotFound: a bare 404 (a wrong base URL, a
// proxy) must never be read as "the charge does not exist", because the
// reconciler turns that into FAILED.
const codeNotFound = "resource_missing"

// errEmptyKey refuses a lookup by an empty key, which would answer 404 and
// look like proof that no charge exists.
var errEmptyKey = errors.New("provider: empty idempotency key")

// Sim is the HTTP client of the simulator's provider API (CONTRACT §2). Each
// method is exactly one HTTP call, bounded only by its context and never
// retried; Resilient adds timeouts, retries and the breaker. Every failure of
// a call that was attempted is a *CallError.
type Sim struct {
	baseURL string
	apiKey  string
	client  *http.Client
}

// NewSim returns a client for the provider API at baseURL that authenticates
// with apiKey; a nil httpClient means http.DefaultClient.
func NewSim(baseURL, apiKey string, httpClient *http.Client) *Sim {
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	return &Sim{baseURL: strings.TrimRight(baseURL, "/"), apiKey: apiKey, client: httpClient}
}

// Name is the provider's name as stored on attempts.
func (s *Sim) Name() string { return "sim" }

// chargeBody is the body of POST /v1/charges.
type chargeBody struct {
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	PaymentMethod string `json:"payment_method"`
	Reference     string `json:"reference"`
}

// errorBody is the provider's error answer, and for a decline also the charge.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Charge *Charge `json:"charge"`
}

// PostCharge makes one POST /v1/charges. A decline is a *CallError of
// KindDeclined carrying the failed charge.
func (s *Sim) PostCharge(ctx context.Context, req ChargeRequest) (Charge, error) {
	body := chargeBody{Amount: req.Amount, Currency: req.Currency, PaymentMethod: req.PaymentMethod, Reference: req.Reference}
	resp, err := s.do(ctx, opCharge, http.MethodPost, "/v1/charges", nil, req.IdempotencyKey, body)
	if err != nil {
		return Charge{}, err
	}
	switch resp.status {
	case http.StatusCreated:
		var ch Charge
		if err := resp.decode(opCharge, &ch); err != nil {
			return Charge{}, err
		}
		if ch.ID == "" || ch.Status != ChargeSucceeded || (ch.IdempotencyKey != "" && ch.IdempotencyKey != req.IdempotencyKey) {
			return Charge{}, resp.bad(opCharge, "201 without a succeeded charge for our key")
		}
		return ch, nil
	case http.StatusPaymentRequired:
		var eb errorBody
		// A 402 is a decline only with the failed charge the provider recorded;
		// anything less is an answer we do not understand, not a proof.
		if json.Unmarshal(resp.body, &eb) != nil || eb.Charge == nil || eb.Charge.ID == "" || eb.Charge.Status != ChargeFailed {
			return Charge{}, resp.statusError(opCharge)
		}
		code := eb.Error.Code
		if code == "" {
			code = eb.Charge.FailureCode
		}
		if code == "" {
			code = "declined"
		}
		return Charge{}, &CallError{Op: opCharge, Kind: KindDeclined, Sent: true, Status: resp.status, Code: code, Charge: eb.Charge}
	}
	return Charge{}, resp.statusError(opCharge)
}

// ChargeByKey makes one GET /v1/charges?idempotency_key=key. A 404 whose
// error code is resource_missing is a *CallError wrapping ErrNotFound.
func (s *Sim) ChargeByKey(ctx context.Context, key string) (Charge, error) {
	if key == "" {
		return Charge{}, errEmptyKey
	}
	resp, err := s.do(ctx, opLookup, http.MethodGet, "/v1/charges", url.Values{"idempotency_key": {key}}, "", nil)
	if err != nil {
		return Charge{}, err
	}
	if resp.status != http.StatusOK {
		return Charge{}, resp.statusError(opLookup)
	}
	var ch Charge
	if err := resp.decode(opLookup, &ch); err != nil {
		return Charge{}, err
	}
	if ch.ID == "" || ch.IdempotencyKey != key {
		return Charge{}, resp.bad(opLookup, "200 without the charge of our key")
	}
	return ch, nil
}

// ListCharges makes one GET /v1/charges?created_gte=&created_lt= for the
// charges created in [from, to).
func (s *Sim) ListCharges(ctx context.Context, from, to time.Time) ([]Charge, error) {
	q := url.Values{
		"created_gte": {strconv.FormatInt(ceilUnix(from), 10)},
		"created_lt":  {strconv.FormatInt(ceilUnix(to), 10)},
	}
	resp, err := s.do(ctx, opList, http.MethodGet, "/v1/charges", q, "", nil)
	if err != nil {
		return nil, err
	}
	if resp.status != http.StatusOK {
		return nil, resp.statusError(opList)
	}
	var list struct {
		Data *[]Charge `json:"data"`
	}
	if err := resp.decode(opList, &list); err != nil {
		return nil, err
	}
	if list.Data == nil {
		return nil, resp.bad(opList, "200 without data")
	}
	return *list.Data, nil
}

// Refund makes one POST /v1/refunds for the whole of chargeID.
func (s *Sim) Refund(ctx context.Context, chargeID, idempotencyKey string) (Refund, error) {
	body := struct {
		Charge string `json:"charge"`
	}{chargeID}
	resp, err := s.do(ctx, opRefund, http.MethodPost, "/v1/refunds", nil, idempotencyKey, body)
	if err != nil {
		return Refund{}, err
	}
	if resp.status != http.StatusCreated {
		return Refund{}, resp.statusError(opRefund)
	}
	var re Refund
	if err := resp.decode(opRefund, &re); err != nil {
		return Refund{}, err
	}
	if re.ID == "" || re.Charge != chargeID {
		return Refund{}, resp.bad(opRefund, "201 without a refund of our charge")
	}
	return re, nil
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
func (s *Sim) do(ctx context.Context, op, method, path string, query url.Values, key string, in any) (response, error) {
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
			return response{}, &CallError{Op: op, Kind: KindTransport, Err: err}
		}
		body = bytes.NewReader(b)
	}
	u := s.baseURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return response{}, transportError(op, err, false)
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
		return response{}, transportError(op, err, connected.Load())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return response{}, transportError(op, err, true)
	}
	return response{status: resp.StatusCode, body: b}, nil
}

// transportError classifies an error of the HTTP exchange itself. The
// *url.Error net/http returns quotes the request URL, which carries
// PROVIDER_URL's credentials, if any: it is masked, since call errors are
// logged.
func transportError(op string, err error, sent bool) *CallError {
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

// decode parses the body of an expected answer into v.
func (r response) decode(op string, v any) error {
	if err := json.Unmarshal(r.body, v); err != nil {
		return &CallError{Op: op, Kind: KindBadResponse, Sent: true, Status: r.status, Err: err}
	}
	return nil
}

func (r response) bad(op, why string) error {
	return &CallError{Op: op, Kind: KindBadResponse, Sent: true, Status: r.status, Err: errors.New(why)}
}

// statusError is an answer with a status the call does not expect.
func (r response) statusError(op string) error {
	e := &CallError{Op: op, Kind: KindStatus, Sent: true, Status: r.status}
	var eb errorBody
	if json.Unmarshal(r.body, &eb) == nil {
		e.Code = eb.Error.Code
	}
	// A charge call is never "not found"; a refund's 404 is about its charge.
	if op != opCharge && r.status == http.StatusNotFound && e.Code == codeNotFound {
		e.Err = ErrNotFound
	}
	return e
}
