package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/providersim"
)

// The checkout client's patience: it gives up on a request after this long
// (scenario 1), except where it is willing to wait for a slow answer.
const (
	impatient = 500 * time.Millisecond
	patient   = 30 * time.Second
)

// Scenario 1: the provider takes 800 ms, the client gives up at 500 ms and
// retries 700 ms later with the same key; the first request carried on
// without its client, so the retry gets its stored answer replayed.
func (d *Demo) timeoutThenRetry(ctx context.Context) error {
	fmt.Fprintln(d.out, "\n== 1. client times out (provider slow: 800 ms), retries with the same key")
	if err := d.sim.setFaults(ctx, 800); err != nil {
		return err
	}
	body := apiclient.Visa("o-1", 500)
	if a, err := d.client.pay(ctx, d.podA, "key-o-1", body, impatient); err != nil {
		fmt.Fprintf(d.out, "attempt 1 -> pod A: client %s (gave up after %s)\n", shortError(err), impatient)
	} else {
		fmt.Fprintf(d.out, "attempt 1 -> %s\n", a)
	}
	if err := pause(ctx, 700*time.Millisecond); err != nil {
		return err
	}
	// Still 409 only if the first request has not finished yet (a slow machine): try again shortly.
	for n := 2; ; n++ {
		a, err := d.client.pay(ctx, d.podB, "key-o-1", body, patient)
		if err != nil {
			return fmt.Errorf("scenario 1 retry: %w", err)
		}
		fmt.Fprintf(d.out, "attempt %d -> %s\n", n, a)
		if a.HTTPStatus != 409 || n == 20 {
			break
		}
		if err := pause(ctx, 300*time.Millisecond); err != nil {
			return err
		}
	}
	return d.sim.clearFaults(ctx)
}

// Scenario 2: two identical requests 5 ms apart on the two pods. The key's
// primary key lets exactly one own it; the other finds it in progress.
func (d *Demo) concurrentDuplicates(ctx context.Context) error {
	// A little provider latency keeps the first request in flight when the
	// second arrives, as it would be against a real provider.
	fmt.Fprintln(d.out, "\n== 2. two identical requests 5ms apart on different pods (provider latency 100 ms)")
	if err := d.sim.setFaults(ctx, 100); err != nil {
		return err
	}
	body := apiclient.Visa("o-2", 500)
	var (
		wg      sync.WaitGroup
		answers [2]answer
		errs    [2]error
	)
	for i, p := range []pod{d.podA, d.podB} {
		wg.Go(func() { answers[i], errs[i] = d.client.pay(ctx, p, "key-o-2", body, patient) })
		if i == 0 {
			if err := pause(ctx, 5*time.Millisecond); err != nil {
				return err
			}
		}
	}
	wg.Wait()
	busy := false
	for i, p := range []pod{d.podA, d.podB} {
		if errs[i] != nil {
			return fmt.Errorf("scenario 2 on pod %s: %w", p.name, errs[i])
		}
		fmt.Fprintf(d.out, "pod %s -> %s\n", p.name, answers[i])
		busy = busy || answers[i].HTTPStatus == 409
	}
	if busy {
		a, err := d.client.pay(ctx, d.podB, "key-o-2", body, patient)
		if err != nil {
			return err
		}
		fmt.Fprintf(d.out, "client retries on pod B -> %s\n", a)
	}
	return d.sim.clearFaults(ctx)
}

// Scenario 3: the key of scenario 2 reused for a different amount is refused.
func (d *Demo) keyReused(ctx context.Context) error {
	fmt.Fprintln(d.out, "\n== 3. same key, different payload (amount 900 instead of 500)")
	a, err := d.client.pay(ctx, d.podA, "key-o-2", apiclient.Visa("o-2", 900), patient)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "pod A -> %s\n", a)
	return nil
}

// Scenario 4: pod A dies after the provider charged, before saving. A retry
// right away finds the key locked (409); once the lock expires, pod B takes
// the key over and calls the provider again with the same derived key, and
// the provider answers with the charge it already made.
func (d *Demo) crashAfterCharge(ctx context.Context) error {
	fmt.Fprintln(d.out, "\n== 4. pod crashes after the provider charged, before saving")
	d.podA.Stop(10 * time.Second)
	var err error
	if d.podA, err = d.startPod(ctx, "A", "PAYMENTSVC_FAILPOINT=after_provider_call"); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  pod A restarted with PAYMENTSVC_FAILPOINT=after_provider_call (on %s)\n", d.podA.Addr())
	before, err := d.sim.charges(ctx)
	if err != nil {
		return err
	}
	body := apiclient.Visa("o-4", 500)
	if a, err := d.client.pay(ctx, d.podA, "key-o-4", body, patient); err != nil {
		fmt.Fprintf(d.out, "attempt 1 -> pod A: client %s\n", shortError(err))
	} else {
		fmt.Fprintf(d.out, "attempt 1 -> %s (expected pod A to crash)\n", a)
	}
	code, err := d.podA.Wait(30 * time.Second)
	if err != nil {
		return err
	}
	after, err := d.sim.charges(ctx)
	if err != nil {
		return err
	}
	made := newCharges(before, after)
	fmt.Fprintf(d.out, "  pod A CRASHED (exit status %d) after the provider charged %s, before saving\n", code, strings.Join(made, ", "))

	a, err := d.client.pay(ctx, d.podB, "key-o-4", body, patient)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "retry now -> %s\n", a)
	for a.HTTPStatus == 409 {
		wait := time.Duration(max(a.RetryAfter, 1)) * time.Second
		fmt.Fprintf(d.out, "  (the client waits the %s of Retry-After)\n", wait)
		if err := pause(ctx, wait); err != nil {
			return err
		}
		if a, err = d.client.pay(ctx, d.podB, "key-o-4", body, patient); err != nil {
			return err
		}
		fmt.Fprintf(d.out, "retry after lock expiry -> %s\n", a)
	}
	fmt.Fprintf(d.out, "  same charge as the one pod A got: %v\n", len(made) == 1 && a.Charge == made[0])
	return nil
}

// newCharges lists the ids in after that are not in before.
func newCharges(before, after []providersim.Charge) []string {
	var ids []string
	for _, c := range after {
		if !slices.ContainsFunc(before, func(b providersim.Charge) bool { return b.ID == c.ID }) {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// orderTally is one order's line of the final account.
type orderTally struct {
	OrderID  string `json:"order_id"`
	Payments int    `json:"payments"`
	Charge   string `json:"charge"`
}

// tally prints the payments of every order and the provider's calls and
// distinct charges: each order has one payment, and the provider made one
// charge per order however often it was called.
func (d *Demo) tally(ctx context.Context) error {
	var orders []orderTally
	for _, o := range []string{"o-1", "o-2", "o-4"} {
		list, err := d.client.paymentsOf(ctx, d.podB, o)
		if err != nil {
			return err
		}
		t := orderTally{OrderID: o, Payments: len(list)}
		if len(list) > 0 && list[0].ChargeID != nil {
			t.Charge = *list[0].ChargeID
		}
		orders = append(orders, t)
	}
	charges, err := d.sim.charges(ctx)
	if err != nil {
		return err
	}
	calls, err := d.sim.chargeCalls(ctx)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(orders)
	fmt.Fprintf(d.out, "\nour payments: %s\n", b)
	fmt.Fprintf(d.out, "provider: %d distinct charges for %d calls\n", len(charges), calls)
	return nil
}

// pause waits d, the way a client waits before it retries, unless ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
