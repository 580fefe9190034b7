//go:build ha

package ha

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/proctest"
)

// Traffic shape: a few checkouts paying one order after another, each
// retrying its payment with the same Idempotency-Key until it is paid.
const (
	workers     = 4
	pace        = 60 * time.Millisecond // between one worker's payments
	payDeadline = time.Minute           // one payment, all its tries
)

// payment is a payment a client was answered 201 for.
type payment struct {
	order, key string
	id         string
	chargeID   string
	tries      int
	doneAt     time.Time
	// unseen: the 201 was a replay of a completion that no earlier try of
	// this client was answered with, so a request that failed (or whose
	// answer was lost) had committed it; failed lists those earlier tries.
	unseen bool
	failed []string
}

// answer is one try as the client saw it.
type answer struct {
	at   time.Time // when the answer or the error came
	ok   bool      // a 2xx
	kind string    // "201", "409 idempotency_key_in_use", "500 internal_error", "timeout", "transport", …
}

// traffic is steady payment traffic on every pod.
type traffic struct {
	name    string
	clients []*proctest.Client
	stop    chan struct{}
	halted  sync.Once
	wg      sync.WaitGroup

	mu      sync.Mutex
	answers []answer
	paid    []payment
	errs    []error
}

// startTraffic starts the workers of one scenario; its orders are prefixed
// with name, so they never meet another scenario's.
func (h *harness) startTraffic(name string) *traffic {
	tr := &traffic{name: name, clients: h.clients(), stop: make(chan struct{})}
	for w := range workers {
		tr.wg.Go(func() { tr.worker(w) })
	}
	return tr
}

func (tr *traffic) worker(w int) {
	for n := 0; ; n++ {
		select {
		case <-tr.stop:
			return
		default:
		}
		order := fmt.Sprintf("%s-w%d-%04d", tr.name, w, n)
		p, err := tr.pay(w, order, "key-"+order, int64(100+rand.IntN(9900)))
		tr.mu.Lock()
		if err != nil {
			tr.errs = append(tr.errs, err)
		} else {
			tr.paid = append(tr.paid, p)
		}
		tr.mu.Unlock()
		if err != nil {
			return
		}
		select {
		case <-tr.stop:
			return
		case <-time.After(pace):
		}
	}
}

// pay tries one payment like a careful checkout: the same key on every try,
// each try to the next pod, until it is paid. Timeouts, connection errors,
// 5xx, 409 idempotency_key_in_use and 202 are tried again after a jittered
// backoff, or after Retry-After when the answer has one; anything else
// is a failure of the test.
func (tr *traffic) pay(w int, order, key string, amount int64) (payment, error) {
	raw, err := json.Marshal(apiclient.Visa(order, amount))
	if err != nil {
		return payment{}, err
	}
	deadline := time.Now().Add(payDeadline)
	wait := 100 * time.Millisecond
	var failed []string
	answered := false // some earlier try got a 2xx
	for try := 1; ; try++ {
		// The request id names the key and the try, so a failure in a
		// pod's log leads back to the payment.
		r, err := tr.clients[(w+try)%len(tr.clients)].Do(http.MethodPost, "/v1/payments", raw, map[string]string{
			"Idempotency-Key": key, "Content-Type": "application/json", "X-Request-Id": fmt.Sprintf("%s.%d", key, try),
		})
		a := answer{at: time.Now()}
		switch {
		case err != nil:
			a.kind = transportKind(err)
		case r.Status/100 == 2:
			a.ok, a.kind = true, strconv.Itoa(r.Status)
		default:
			a.kind = fmt.Sprintf("%d %s", r.Status, r.Str("code"))
		}
		tr.mu.Lock()
		tr.answers = append(tr.answers, a)
		tr.mu.Unlock()
		if !a.ok {
			failed = append(failed, a.kind)
		}

		if err == nil {
			switch {
			case r.Status == 201:
				if r.Str("status") != "SUCCEEDED" || r.Str("id") == "" {
					return payment{}, fmt.Errorf("order %s: 201 with %s", order, r)
				}
				return payment{
					order: order, key: key, id: r.Str("id"), chargeID: r.Str("provider_charge_id"), tries: try, doneAt: a.at,
					unseen: r.Replayed() && !answered && len(failed) > 0, failed: failed,
				}, nil
			case r.Status == 202, r.Status == 409 && r.Str("code") == "idempotency_key_in_use", r.Status >= 500:
				answered = answered || r.Status == 202
				if s, perr := strconv.Atoi(r.Header.Get("Retry-After")); perr == nil && s > 0 {
					wait = min(time.Duration(s)*time.Second, lockTTL)
				}
			default:
				return payment{}, fmt.Errorf("order %s try %d: unexpected answer %s", order, try, r)
			}
		}
		if time.Now().Add(wait).After(deadline) {
			return payment{}, fmt.Errorf("order %s: not paid within %s (%d tries, last %s)", order, payDeadline, try, a.kind)
		}
		time.Sleep(wait/2 + rand.N(wait/2+1))
		wait = min(2*wait, time.Second)
	}
}

// transportKind names a failed try that got no HTTP answer.
func transportKind(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return "transport"
}

// waitPaid waits until n payments were answered 201 after since, and
// returns when the first of them was; it fails t if a worker failed.
func (tr *traffic) waitPaid(t *testing.T, since time.Time, n int, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		tr.mu.Lock()
		errs := slices.Clone(tr.errs)
		var first time.Time
		count := 0
		for _, p := range tr.paid {
			if p.doneAt.After(since) {
				count++
				if first.IsZero() || p.doneAt.Before(first) {
					first = p.doneAt
				}
			}
		}
		tr.mu.Unlock()
		if len(errs) > 0 {
			t.Fatalf("%s: a checkout failed: %v", tr.name, errors.Join(errs...))
		}
		if count >= n {
			return first
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d payments paid since %s, want %d within %s", tr.name, count, since.Format("15:04:05.000"), n, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// halt asks the workers to stop after their payment in flight.
func (tr *traffic) halt() { tr.halted.Do(func() { close(tr.stop) }) }

// finish stops the workers once their payments in flight are paid and
// returns every payment of the scenario.
func (tr *traffic) finish(t *testing.T) []payment {
	t.Helper()
	tr.halt()
	done := make(chan struct{})
	go func() { tr.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(payDeadline + 30*time.Second):
		t.Fatalf("%s: checkouts still paying after %s", tr.name, payDeadline+30*time.Second)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.errs) > 0 {
		t.Fatalf("%s: a checkout failed: %v", tr.name, errors.Join(tr.errs...))
	}
	return slices.Clone(tr.paid)
}

// commitReport tells how many requests failed at COMMIT (keys, from the
// pods' logs) and how many of those COMMITs turned out durable where that
// can be seen: a completion whose 201 a later try got as a replay although
// no try before had a 2xx answer.
func commitReport(paid []payment, failed map[string]bool) string {
	durable := 0
	for _, p := range paid {
		if p.unseen && failed[p.key] {
			durable++
		}
	}
	return fmt.Sprintf("%d requests failed at COMMIT, %d of them a completion that was durable", len(failed), durable)
}

// failedCommits lists, from the pods' logs, the keys of requests after
// since that failed at COMMIT, by the request ids the checkouts sent.
func failedCommits(pods []*proctest.Process, since time.Time) map[string]bool {
	keys := map[string]bool{}
	for _, p := range pods {
		for _, line := range strings.Split(p.Logs(), "\n") {
			var rec struct {
				Time      time.Time `json:"time"`
				Msg       string    `json:"msg"`
				RequestID string    `json:"request_id"`
				Err       string    `json:"err"`
			}
			if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "request failed" || rec.Time.Before(since) ||
				!strings.HasPrefix(rec.Err, "commit: ") {
				continue
			}
			if i := strings.LastIndexByte(rec.RequestID, '.'); i > 0 {
				keys[rec.RequestID[:i]] = true
			}
		}
	}
	return keys
}

// outage is what clients saw from a fault on.
type outage struct {
	errWindow time.Duration  // first to last try that was not answered 2xx
	maxGap    time.Duration  // longest time without a 2xx answer (from the fault on)
	failed    map[string]int // tries not answered 2xx, by kind
	answered  map[string]int // 2xx answers, by status
}

func (o outage) String() string {
	return fmt.Sprintf("longest gap between 2xx %s, errors over %s; failed tries %s; 2xx %s",
		o.maxGap.Round(10*time.Millisecond), o.errWindow.Round(10*time.Millisecond), kinds(o.failed), kinds(o.answered))
}

func kinds(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s×%d", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// outage measures the answers from `from` (the fault) on.
func (tr *traffic) outage(from time.Time) outage {
	tr.mu.Lock()
	answers := slices.Clone(tr.answers)
	tr.mu.Unlock()
	sort.Slice(answers, func(i, j int) bool { return answers[i].at.Before(answers[j].at) })
	o := outage{failed: map[string]int{}, answered: map[string]int{}}
	lastOK := from
	var firstErr, lastErr time.Time
	for _, a := range answers {
		if a.at.Before(from) {
			continue
		}
		if a.ok {
			o.answered[a.kind]++
			o.maxGap = max(o.maxGap, a.at.Sub(lastOK))
			lastOK = a.at
			continue
		}
		o.failed[a.kind]++
		if firstErr.IsZero() {
			firstErr = a.at
		}
		lastErr = a.at
	}
	o.errWindow = lastErr.Sub(firstErr)
	return o
}
