package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// maxBody bounds an answer read into memory: a page of 100 payments with
// full metadata is about 3 MiB.
const maxBody = 32 << 20

// call is one API call: the same request, byte for byte and with the same
// Idempotency-Key, sent on every try.
type call struct {
	method string
	path   string // escaped
	query  url.Values
	body   []byte // nil: no body
	key    string // Idempotency-Key; "" for none
	// once sends the call one time: it is not idempotent, and a retry after
	// a lost answer would do it again (a secret rotation).
	once bool

	// accept judges an answer that is not a problem: 2xx, or 402 for
	// creates. done ends the call; an error (an answer that does not
	// decode, a status the call does not expect) is retried.
	accept func(a *answer) (done bool, err error)
}

func (cl *call) op() string { return cl.method + " " + cl.path }

// answer is one HTTP answer, read in full.
type answer struct {
	method, url string
	status      int
	header      http.Header
	body        []byte
}

// run sends cl until accept says done, a refusal that cannot change comes
// back (a *Problem), or the call's deadline passes or ctx ends (a
// *NotFinalError). This is where the retry rules live:
//
//   - retried: no answer (connection refused or reset, TryTimeout), 408,
//     409 idempotency_key_in_use, 429, every 5xx, any answer that is neither
//     a problem document nor what the call expects, and an answer accept
//     does not take as done (a 202 for a create);
//   - waited before each retry: a jittered exponential backoff, or the
//     answer's Retry-After if that is longer;
//   - not retried: every other 4xx problem (400, 401, 404, 405, 409
//     order_already_has_payment and payment_not_refundable, 413, 415, 422);
//   - each try goes to the next URL, starting with the first.
//
// Every try sends the same body and the same key: the client never sends
// two keys for one call.
func (c *Client) run(ctx context.Context, cl *call) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var last error
	for try := 0; ; try++ {
		if err := ctx.Err(); err != nil {
			return c.notFinal(cl, try, last, err)
		}
		a, err := c.send(ctx, c.urls[try%len(c.urls)], cl)
		var retryAfter time.Duration
		if err != nil {
			last = err
		} else {
			done, ra, rerr := c.judge(cl, a)
			if done {
				return rerr
			}
			last, retryAfter = rerr, ra
		}
		if cl.once {
			return c.notFinal(cl, try+1, last, errNotRetried)
		}
		wait := max(c.backoff(try), retryAfter)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
			// The next try could not start before the deadline: say so now
			// rather than sleep through the rest of it.
			return c.notFinal(cl, try+1, last, context.DeadlineExceeded)
		}
		if c.log != nil {
			c.log.InfoContext(ctx, "paymentsvc client: retrying", "op", cl.op(), "try", try+1,
				"url", c.urls[try%len(c.urls)], "reason", reason(a, last), "wait", wait.String(), "idempotency_key", cl.key)
		}
		if err := sleep(ctx, wait); err != nil {
			return c.notFinal(cl, try+1, last, err)
		}
	}
}

// judge decides what an answer means for the call: done (with nil or a
// *Problem), or a retry after the failure err and at least retryAfter.
func (c *Client) judge(cl *call, a *answer) (done bool, retryAfter time.Duration, err error) {
	if a.status >= 400 && mediaType(a.header) == "application/problem+json" {
		p := &Problem{}
		if derr := json.Unmarshal(a.body, p); derr != nil {
			return false, 0, unexpected(a, derr)
		}
		p.Status = a.status // the header is what every hop agreed on
		p.RetryAfter = parseRetryAfter(a.header.Get("Retry-After"))
		p.RequestID = a.header.Get("X-Request-Id")
		p.IdempotencyKey = cl.key
		if retryable(a.status, p.Code) {
			return false, p.RetryAfter, p
		}
		return true, 0, p
	}
	if a.status/100 == 2 || a.status == http.StatusPaymentRequired { // 402: a declined payment, a refused refund
		done, aerr := cl.accept(a)
		return done, 0, aerr
	}
	// A proxy's or load balancer's page, a 5xx without a problem: retry,
	// honouring its Retry-After if it sent one.
	return false, parseRetryAfter(a.header.Get("Retry-After")), unexpected(a, nil)
}

// retryable reports whether a problem may change by retrying the same request.
func retryable(status int, code Code) bool {
	switch {
	case status == http.StatusConflict:
		return code == CodeIdempotencyKeyInUse
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500:
		return true
	}
	return false
}

// send makes one try against base, bounded by TryTimeout, and reads the
// whole answer.
func (c *Client) send(ctx context.Context, base string, cl *call) (*answer, error) {
	tctx, cancel := context.WithTimeout(ctx, c.tryTimeout)
	defer cancel()
	u := base + cl.path
	if len(cl.query) > 0 {
		u += "?" + cl.query.Encode()
	}
	var body io.Reader
	if cl.body != nil {
		body = bytes.NewReader(cl.body)
	}
	req, err := http.NewRequestWithContext(tctx, cl.method, u, body)
	if err != nil {
		return nil, &TransportError{Method: cl.method, URL: u, Err: err}
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("User-Agent", "paymentsvc-go-client")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	if cl.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cl.key != "" {
		req.Header.Set("Idempotency-Key", cl.key)
	}
	failed := func(err error) *TransportError {
		if ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded) {
			// The try's own timeout, not the call's end: said without
			// wrapping context.DeadlineExceeded, which a *NotFinalError
			// reports only when the call's deadline ended it.
			return &TransportError{Method: cl.method, URL: u, Timeout: true, Err: fmt.Errorf("try timed out after %s: %s", c.tryTimeout, err)}
		}
		return &TransportError{Method: cl.method, URL: u, Err: err}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, failed(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, failed(fmt.Errorf("reading the %d answer: %w", resp.StatusCode, err))
	}
	a := &answer{method: cl.method, url: u, status: resp.StatusCode, header: resp.Header, body: raw}
	if len(raw) > maxBody {
		a.body = raw[:256]
		return nil, unexpected(a, fmt.Errorf("answer larger than %d bytes", maxBody))
	}
	return a, nil
}

func (c *Client) notFinal(cl *call, tries int, last, cause error) *NotFinalError {
	return &NotFinalError{Op: cl.op(), IdempotencyKey: cl.key, Tries: tries, Last: last, cause: cause}
}

// backoff is the wait before retry try+1: exponential from MinBackoff,
// capped at MaxBackoff, with "equal jitter" (half fixed, half random) so
// that clients that failed together do not retry together.
func (c *Client) backoff(try int) time.Duration {
	d := c.minBackoff
	for i := 0; i < try && d < c.maxBackoff; i++ {
		d *= 2
	}
	d = min(d, c.maxBackoff)
	half := d / 2
	return half + rand.N(half+1)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// parseRetryAfter reads Retry-After as delay-seconds or an HTTP date.
// maxRetryAfterSeconds caps a Retry-After in seconds (a year).
const maxRetryAfterSeconds = 365 * 24 * 3600

func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0
		}
		// A longer wait than any deadline could allow is as good as
		// forever, and n seconds would overflow a Duration past ~292 years.
		return time.Duration(min(n, maxRetryAfterSeconds)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

func mediaType(h http.Header) string {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt
}

func unexpected(a *answer, err error) *UnexpectedAnswerError {
	body := a.body
	if len(body) > 256 {
		body = body[:256]
	}
	return &UnexpectedAnswerError{Method: a.method, URL: a.url, Status: a.status, ContentType: a.header.Get("Content-Type"), Body: string(body), Err: err}
}

// reason says in a few words why a try is retried, for the log.
func reason(a *answer, err error) string {
	switch e := err.(type) {
	case *Problem:
		return fmt.Sprintf("%d %s", e.Status, e.Code)
	case *TransportError:
		if e.Timeout {
			return "try timed out"
		}
		return e.Err.Error()
	case nil:
		if a != nil {
			return fmt.Sprintf("%d: not final yet", a.status)
		}
		return ""
	}
	return err.Error()
}

// decode is an accept helper: it decodes a's body into a new T when a's
// status is one of want.
func decode[T any](a *answer, want ...int) (*T, error) {
	ok := false
	for _, s := range want {
		ok = ok || a.status == s
	}
	if !ok {
		return nil, unexpected(a, nil)
	}
	v := new(T)
	if err := json.Unmarshal(a.body, v); err != nil {
		return nil, unexpected(a, err)
	}
	return v, nil
}
