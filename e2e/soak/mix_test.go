package soak

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testkit"
)

// operation is one kind of request of the mixed load: a new kind (a
// capture, a void) is one more entry in mix.
type operation struct {
	name   string
	weight int // its share of the load, against the others' weights
	// run makes one request through pod c and returns its status; an error
	// is a transport error (a pod restarting), or errNothingYet.
	run func(l *load, c *apiclient.Client, rnd *rand.Rand) (int, error)
	// ok are the statuses it may answer (anything else fails the soak).
	ok []int
}

// mix is the load: creates (some only authorized), replays, reads,
// refunds, captures, voids and provider faults; the simulator's webhooks (for
// every charge, refund, capture and void) and a pod restart come on top
// (soak_test.go).
var mix = []operation{
	{name: "create", weight: 24, run: (*load).create,
		// 202: UNKNOWN under a fault; 402: declined; 503: breaker open.
		ok: []int{http.StatusCreated, http.StatusAccepted, http.StatusPaymentRequired, http.StatusServiceUnavailable}},
	{name: "replay", weight: 9, run: (*load).replay,
		// 409: still in progress on the other pod.
		ok: []int{http.StatusCreated, http.StatusAccepted, http.StatusPaymentRequired, http.StatusConflict, http.StatusServiceUnavailable}},
	{name: "get", weight: 6, run: (*load).get, ok: []int{http.StatusOK}},
	{name: "refund", weight: 9, run: (*load).refund,
		// 422: nothing left to refund.
		ok: []int{http.StatusCreated, http.StatusAccepted, http.StatusPaymentRequired, http.StatusConflict,
			http.StatusUnprocessableEntity, http.StatusServiceUnavailable}},
	{name: "authorize", weight: 6, run: (*load).authorize,
		ok: []int{http.StatusCreated, http.StatusAccepted, http.StatusPaymentRequired, http.StatusServiceUnavailable}},
	// 409: captured or voided already (by the other kind, or a replay's
	// race); 422: more than held.
	{name: "capture", weight: 4, run: (*load).capture,
		ok: []int{http.StatusCreated, http.StatusAccepted, http.StatusPaymentRequired, http.StatusConflict,
			http.StatusUnprocessableEntity, http.StatusServiceUnavailable}},
	{name: "void", weight: 2, run: (*load).void,
		ok: []int{http.StatusCreated, http.StatusAccepted, http.StatusPaymentRequired, http.StatusConflict, http.StatusServiceUnavailable}},
	// About one switch every 2.5 s at 20 operations/s.
	{name: "provider_fault", weight: 1, run: (*load).fault, ok: []int{http.StatusOK}},
}

// pick chooses an operation by weight.
func pick(rnd *rand.Rand) *operation {
	total := 0
	for _, op := range mix {
		total += op.weight
	}
	n := rnd.IntN(total)
	for i := range mix {
		if n < mix[i].weight {
			return &mix[i]
		}
		n -= mix[i].weight
	}
	return &mix[len(mix)-1]
}

// load is the state the operations share: the recent payments (a bounded
// ring, so the test's own memory stays flat) and the simulator.
type load struct {
	sim *simControl

	mu     sync.Mutex
	recent []created // the last maxRecent creates
	next   int
}

// maxRecent bounds the payments kept for replays and refunds.
const maxRecent = 256

// created is a create request and what it answered.
type created struct {
	key       string
	body      apiclient.Payment
	paymentID string
	succeeded bool
	// authorized: answered 201 AUTHORIZED (a manual payment, to capture
	// or void).
	authorized bool
}

func (l *load) remember(c created) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.recent) < maxRecent {
		l.recent = append(l.recent, c)
		return
	}
	l.recent[l.next] = c
	l.next = (l.next + 1) % maxRecent
}

// some returns a recent create (ok false if none yet); succeeded only
// those that answered 201 SUCCEEDED.
func (l *load) some(rnd *rand.Rand, succeeded bool) (created, bool) {
	return l.someOf(rnd, func(c created) bool { return !succeeded || c.succeeded })
}

// someOf returns a recent create that keep accepts (ok false if none).
func (l *load) someOf(rnd *rand.Rand, keep func(created) bool) (created, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var from []created
	for _, c := range l.recent {
		if keep(c) {
			from = append(from, c)
		}
	}
	if len(from) == 0 {
		return created{}, false
	}
	return from[rnd.IntN(len(from))], true
}

func (l *load) create(c *apiclient.Client, rnd *rand.Rand) (int, error) {
	return l.pay(c, rnd, "")
}

// authorize creates a manual payment: the provider only holds the amount.
func (l *load) authorize(c *apiclient.Client, rnd *rand.Rand) (int, error) {
	return l.pay(c, rnd, "manual")
}

func (l *load) pay(c *apiclient.Client, rnd *rand.Rand, captureMethod string) (int, error) {
	key := testkit.RandomID("soak-")
	body := apiclient.Visa("o-"+key, int64(100+rnd.IntN(900)))
	body.CaptureMethod = captureMethod
	if rnd.IntN(10) == 0 {
		body.PaymentMethod = "pm_card_declined"
	}
	r, err := c.Pay(key, body)
	if err != nil {
		return 0, err
	}
	if id := r.Str("id"); id != "" {
		ok := r.Status == http.StatusCreated
		l.remember(created{key: key, body: body, paymentID: id,
			succeeded: ok && r.Str("status") == "SUCCEEDED", authorized: ok && r.Str("status") == "AUTHORIZED"})
	}
	return r.Status, nil
}

// capture captures part or all of an authorized payment, under a new key.
func (l *load) capture(c *apiclient.Client, rnd *rand.Rand) (int, error) {
	return l.hold(c, rnd, "captures", map[string]int64{"amount": 0})
}

// void voids an authorized payment, under a new key.
func (l *load) void(c *apiclient.Client, rnd *rand.Rand) (int, error) {
	return l.hold(c, rnd, "voids", nil)
}

// hold posts a capture or void (what: "captures" or "voids") of a recent
// authorized payment; a capture's amount is drawn up to the held amount.
func (l *load) hold(c *apiclient.Client, rnd *rand.Rand, what string, body map[string]int64) (int, error) {
	p, ok := l.someOf(rnd, func(c created) bool { return c.authorized })
	if !ok {
		return 0, errNothingYet
	}
	if body != nil {
		body["amount"] = int64(1 + rnd.IntN(int(p.body.Amount)))
	}
	raw := []byte(`{}`)
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	r, err := c.Do(http.MethodPost, "/v1/payments/"+p.paymentID+"/"+what, raw, map[string]string{
		"Idempotency-Key": testkit.RandomID("soak-" + what + "-"), "Content-Type": "application/json",
	})
	return r.Status, err
}

// errNothingYet is an operation on an earlier payment before there is one
// to work on: skipped.
var errNothingYet = errors.New("no payment to work on yet")

func (l *load) replay(c *apiclient.Client, rnd *rand.Rand) (int, error) {
	p, ok := l.some(rnd, false)
	if !ok {
		return 0, errNothingYet
	}
	r, err := c.Pay(p.key, p.body)
	return r.Status, err
}

func (l *load) get(c *apiclient.Client, rnd *rand.Rand) (int, error) {
	p, ok := l.some(rnd, false)
	if !ok {
		return 0, errNothingYet
	}
	r, err := c.Get("/v1/payments/" + p.paymentID)
	return r.Status, err
}

func (l *load) refund(c *apiclient.Client, rnd *rand.Rand) (int, error) {
	p, ok := l.some(rnd, true)
	if !ok {
		return 0, errNothingYet
	}
	body, _ := json.Marshal(map[string]int64{"amount": int64(1 + rnd.IntN(int(p.body.Amount)/2))})
	r, err := c.Do(http.MethodPost, "/v1/payments/"+p.paymentID+"/refunds", body, map[string]string{
		"Idempotency-Key": testkit.RandomID("soak-refund-"), "Content-Type": "application/json",
	})
	return r.Status, err
}

// faults are the simulator's fault sets the load switches between; most
// of the time none.
var faults = []providersim.Faults{
	{}, {}, {}, {},
	{LatencyMS: 300},
	{ErrorRate: 0.2, ErrorStatus: http.StatusServiceUnavailable, Refunds: true, Captures: true},
	{DropAfterCommit: true},
}

// fault replaces the simulator's faults with one of faults.
func (l *load) fault(_ *apiclient.Client, rnd *rand.Rand) (int, error) {
	f := faults[rnd.IntN(len(faults))]
	if err := l.sim.set(f); err != nil {
		return 0, fmt.Errorf("set faults %+v: %w", f, err)
	}
	return http.StatusOK, nil
}
