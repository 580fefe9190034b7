package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// maxAnswerBytes is the most of a merchant's answer an attempt reads (its
// header block, and its body).
const maxAnswerBytes = 64 << 10

// Bounds of what last_error keeps of an answer or an error.
const (
	maxExcerpt  = 200
	maxErrorLen = 500
)

// userAgent identifies the deliveries to the merchant.
const userAgent = "paymentsvc-webhooks/1"

// job is a claimed delivery: what its attempt needs.
type job struct {
	id         string
	lease      int64 // the claim's; a result under an older one changes no state
	step       int   // retries of the schedule spent
	eventID    string
	endpointID string
	url        string
	secrets    []string // the current one first
	body       []byte
}

// The outcomes of an attempt for its delivery (DeliveryRecord).
const (
	outcomeDelivered = "delivered"
	outcomeRetry     = "retry"
	outcomeFailed    = "failed"
)

// result is what became of a job: an attempt's outcome, or a release (it
// was never attempted: the pod is stopping).
type result struct {
	job
	release    bool
	outcome    string
	reason     string // the audit row's: delivered, attempt_failed, retries_exhausted, address_refused, …
	kind       string // the metrics' result: success, http_error, timeout, …
	statusCode int    // 0: no answer
	errText    string // last_error; "" for a 2xx
	delay      time.Duration
	duration   time.Duration
}

// attempt makes one POST of j to its endpoint and says what it means: a 2xx
// within Timeout delivers it; anything else is retried after the next delay
// of the schedule, or fails it once the schedule is spent; a refused address
// (or a plain-HTTP URL that is not allowed) fails it at once. cutoff ends
// when the pod stops taking its time.
func (d *Deliverer) attempt(cutoff context.Context, j job) result {
	start := time.Now()
	ctx, cancel := context.WithTimeout(cutoff, d.cfg.Timeout)
	defer cancel()
	r := d.send(ctx, j)
	r.job, r.duration = j, time.Since(start)
	switch {
	case r.kind == "success":
		r.outcome, r.reason = outcomeDelivered, "delivered"
	case r.outcome == outcomeFailed: // final whatever the schedule
	case cutoff.Err() != nil:
		r.kind, r.errText = "shutdown", "cut off: the pod delivering it was shutting down"
		fallthrough
	default:
		r.outcome, r.reason = outcomeRetry, "attempt_failed"
		if j.step >= len(d.cfg.Schedule) {
			r.outcome, r.reason = outcomeFailed, "retries_exhausted"
		} else {
			r.delay = d.cfg.Schedule[j.step]
		}
	}
	return r
}

// send is the HTTP exchange of an attempt.
func (d *Deliverer) send(ctx context.Context, j job) result {
	u, err := url.Parse(j.url)
	if err != nil {
		return result{outcome: outcomeFailed, reason: "invalid_url", kind: "connection_error", errText: "the endpoint's URL cannot be parsed"}
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && d.cfg.AllowHTTP) {
		return result{outcome: outcomeFailed, reason: "scheme_refused", kind: "refused_address",
			errText: "refused to send to a " + u.Scheme + ":// URL: only https:// is allowed (MERCHANT_WEBHOOK_ALLOW_HTTP=true allows http://, for development)"}
	}
	keys := make([][]byte, 0, len(j.secrets))
	for _, s := range j.secrets {
		k, err := secretKey(s)
		if err != nil {
			return result{outcome: outcomeFailed, reason: "bad_secret", kind: "connection_error", errText: "the endpoint's signing secret is unreadable"}
		}
		keys = append(keys, k)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.url, bytes.NewReader(j.body))
	if err != nil {
		return result{outcome: outcomeFailed, reason: "invalid_url", kind: "connection_error", errText: "the endpoint's URL cannot be requested"}
	}
	ts := time.Now().Unix()
	req.Header["Content-Type"] = []string{"application/json"}
	req.Header["User-Agent"] = []string{userAgent}
	// Set as Standard Webhooks spells them (header names are
	// case-insensitive; http.Header.Set would send Webhook-Id).
	req.Header[headerID] = []string{j.eventID}
	req.Header[headerTimestamp] = []string{strconv.FormatInt(ts, 10)}
	req.Header[headerSignature] = []string{signature(keys, j.eventID, ts, j.body)}
	resp, err := d.client.Do(req)
	if err != nil {
		return d.failure(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	r := result{statusCode: resp.StatusCode}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		r.kind = "success"
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		r.kind, r.errText = "http_error", fmt.Sprintf("HTTP %d: a redirect, which is not followed", resp.StatusCode)
	default:
		r.kind, r.errText = "http_error", fmt.Sprintf("HTTP %d", resp.StatusCode)
		if e := excerpt(answer); e != "" {
			r.errText += ": " + e
		}
	}
	return r
}

// failure is an attempt that got no answer.
func (d *Deliverer) failure(err error) result {
	var refused *AddressError
	if errors.As(err, &refused) {
		return result{outcome: outcomeFailed, reason: "address_refused", kind: "refused_address", errText: refused.Error()}
	}
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return result{kind: "timeout", errText: fmt.Sprintf("no answer within %s", d.cfg.Timeout)}
	}
	// The *url.Error's own text repeats the URL, whose user info a merchant
	// may have put a password in: only what went wrong is kept.
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		err = urlErr.Err
	}
	return result{kind: "connection_error", errText: clip(err.Error(), maxErrorLen)}
}

// excerpt is the start of an answer's body, as printable text.
func excerpt(body []byte) string {
	s := strings.ToValidUTF8(string(body[:min(len(body), maxExcerpt)]), "")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(body) > maxExcerpt && s != "" {
		s += "…"
	}
	return s
}

// clip cuts s to at most n bytes, on a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = strings.ToValidUTF8(s[:n], "")
	return s + "…"
}
