package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/providersim"
)

// Scenario 5: the provider makes a refund but its answer is lost (it closes
// the connection after committing, on every try). The refund is UNKNOWN
// (202), holding its amount; the client's retry with the same key resumes it,
// the provider, asked again under the refund's derived key, answers with the
// refund it already made, and the customer is refunded once.
func (d *Demo) refundAnswerLost(ctx context.Context) error {
	fmt.Fprintln(d.out, "\n== 5. the provider refunds, but its answer is lost; the client retries the refund with the same key")
	// Pod A crashed on purpose in scenario 4: it comes back as it normally runs.
	var err error
	if d.podA, err = d.startPod(ctx, "A"); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  pod A restarted without the failpoint (on %s)\n", d.podA.Addr())
	paid, err := d.client.pay(ctx, d.podA, "key-o-5", apiclient.Visa("o-5", 500), patient)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "pay o-5 -> %s\n", paid)
	if paid.HTTPStatus != http.StatusCreated {
		return fmt.Errorf("scenario 5: paying o-5 answered %s", paid)
	}
	before, err := d.sim.stats(ctx)
	if err != nil {
		return err
	}
	faults := providersim.Faults{DropAfterCommit: true, Refunds: true}
	if err := d.sim.setFaultSet(ctx, faults); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  PUT /_sim/faults on %s %s: it refunds, then closes the connection without answering\n", providerA, faultsJSON(faults))

	const key = "key-refund-o-5"
	first, err := d.client.refund(ctx, d.podA, paid.PaymentID, key, 200)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "refund attempt 1 -> %s\n", first)
	if err := d.sim.clearFaults(ctx); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  %s faults cleared\n", providerA)

	retried, err := retry(ctx, d, "refund retry, same key", func() (opAnswer, error) {
		return d.client.refund(ctx, d.podB, paid.PaymentID, key, 200)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  same refund as attempt 1: %v\n", retried.id() != "" && retried.id() == first.id())
	again, err := d.client.refund(ctx, d.podA, paid.PaymentID, key, 200)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "refund retry again -> %s\n", again)

	after, err := d.sim.stats(ctx)
	if err != nil {
		return err
	}
	var refunded int64
	charges, err := d.sim.charges(ctx)
	if err != nil {
		return err
	}
	for _, ch := range charges {
		if ch.ID == paid.Charge {
			refunded = ch.AmountRefunded
		}
	}
	p, err := d.client.get(ctx, d.podB, "/v1/payments/"+paid.PaymentID)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "provider %s: %d refund made for %d refund calls; charge %s refunded %d of %d\n",
		providerA, after.Refunds-before.Refunds, after.RefundCalls-before.RefundCalls, paid.Charge, refunded, 500)
	fmt.Fprintf(d.out, "payment o-5: status %s, amount_refunded %v, amount_refundable %v\n",
		p.Str("status"), p.JSON["amount_refunded"], p.JSON["amount_refundable"])
	return nil
}

// retry calls send until its answer is no longer refused for the moment
// (409 in use, 503 provider unavailable), at most 20 times, waiting
// Retry-After between tries as a client does, and prints each answer as what.
func retry[A interface {
	fmt.Stringer
	statusAndRetryAfter() (status, retryAfter int)
}](ctx context.Context, d *Demo, what string, send func() (A, error)) (A, error) {
	for n := 1; ; n++ {
		a, err := send()
		if err != nil {
			return a, err
		}
		fmt.Fprintf(d.out, "%s -> %s\n", what, a)
		status, retryAfter := a.statusAndRetryAfter()
		if (status != http.StatusConflict && status != http.StatusServiceUnavailable) || n == 20 {
			return a, nil
		}
		if err := pause(ctx, time.Duration(max(retryAfter, 1))*time.Second); err != nil {
			return a, err
		}
	}
}

// Scenario 6: two providers. The tenant routes EUR to sim_b and everything
// else to sim_a first. A payment whose answer sim_a lost is UNKNOWN at
// sim_a. Then sim_a is killed: each new payment's call to it is refused
// before anything is sent, so the payment goes back to CREATED (not_sent) and
// on to sim_b; but the UNKNOWN payment may have been charged at sim_a, so it
// is never sent to sim_b: its retry answers 503 while sim_a is down, and once
// sim_a is back the retry finds the charge sim_a made.
func (d *Demo) providerOutage(ctx context.Context) error {
	fmt.Fprintf(d.out, "\n== 6. two providers: %s is killed under traffic; a payment moves to %s only when nothing reached %s\n",
		providerA, providerB, providerA)
	rules := `{"rules":[{"currency":"EUR","providers":["` + providerB + `","` + providerA + `"]},{"providers":["` + providerA + `","` + providerB + `"]}]}`
	stored, err := d.client.putRouting(ctx, d.podA, rules)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "PUT /v1/routing -> 200 %s\n", stored)
	pods := []pod{d.podA, d.podB}
	pay := func(order, currency string, p pod) (answer, error) {
		body := apiclient.Visa(order, 500)
		body.Currency = currency
		a, err := d.client.pay(ctx, p, "key-"+order, body, patient)
		if err != nil {
			return a, err
		}
		fmt.Fprintf(d.out, "pay %s (%s) -> %s\n", order, currency, a)
		return a, nil
	}
	if _, err := pay("o-6", "USD", d.podA); err != nil {
		return err
	}
	if _, err := pay("o-7", "EUR", d.podB); err != nil {
		return err
	}

	// sim_a charges o-8 but its answer is lost, on every try.
	faults := providersim.Faults{DropAfterCommit: true}
	if err := d.sim.setFaultSet(ctx, faults); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  PUT /_sim/faults on %s %s: it charges, then closes the connection without answering\n", providerA, faultsJSON(faults))
	lost, err := pay("o-8", "USD", d.podB)
	if err != nil {
		return err
	}
	if err := d.sim.clearFaults(ctx); err != nil {
		return err
	}
	madeAtA, err := chargesOf(ctx, d.sim, lost.PaymentID)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  %s faults cleared; %s holds charge %s for o-8, whose answer it lost: o-8 stays with %s\n",
		providerA, providerA, strings.Join(madeAtA, ", "), providerA)

	addr := d.sim.Addr()
	d.sim.Kill()
	fmt.Fprintf(d.out, "  %s KILLED (exit status %d); new connections to %s are refused\n", providerA, d.sim.ExitCode(), addr)
	// Let the pods notice that their idle connections to sim_a are gone.
	if err := pause(ctx, 300*time.Millisecond); err != nil {
		return err
	}
	var firstAfter answer
	for i := 9; i <= 14; i++ {
		a, err := pay(fmt.Sprintf("o-%d", i), "USD", pods[i%2])
		if err != nil {
			return err
		}
		if i == 9 {
			firstAfter = a
		}
	}
	trail, err := d.auditTrail(ctx, firstAfter.PaymentID)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  audit trail of o-9: %s\n", trail)

	down, err := d.client.pay(ctx, d.podA, "key-o-8", apiclient.Visa("o-8", 500), patient)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "retry o-8 while %s is down -> %s\n", providerA, down)
	atB, err := chargesOf(ctx, d.simB, lost.PaymentID)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  charges of o-8 at %s: %d (it may have been charged at %s, so it is never sent elsewhere)\n", providerB, len(atB), providerA)

	if d.sim, err = d.startSimA(ctx, addr); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  %s restarted on %s, with the charges it had\n", providerA, d.sim.Addr())
	resolved, err := retry(ctx, d, fmt.Sprintf("retry o-8 once %s is back", providerA), func() (answer, error) {
		return d.client.pay(ctx, d.podA, "key-o-8", apiclient.Visa("o-8", 500), patient)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  same charge as the one %s made when its answer was lost: %v\n",
		providerA, len(madeAtA) == 1 && resolved.Charge == madeAtA[0])
	back, err := pay("o-15", "USD", d.podB)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  %s is back: new payments go to it again: %v\n", providerA, back.Provider == providerA)
	return nil
}

// faultsJSON shows the fault set f as PUT /_sim/faults takes it, without its
// zero fields (an omitted field is zero).
func faultsJSON(f providersim.Faults) string {
	b, _ := json.Marshal(struct {
		LatencyMS       int     `json:"latency_ms,omitempty"`
		ErrorRate       float64 `json:"error_rate,omitempty"`
		ErrorStatus     int     `json:"error_status,omitempty"`
		DropAfterCommit bool    `json:"drop_after_commit,omitempty"`
		Refunds         bool    `json:"refunds,omitempty"`
		Captures        bool    `json:"captures,omitempty"`
	}(f))
	return string(b)
}

// chargesOf lists the ids of the succeeded charges sim holds for paymentID
// (the charge's reference).
func chargesOf(ctx context.Context, sim simulator, paymentID string) ([]string, error) {
	charges, err := sim.charges(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, ch := range charges {
		if ch.Reference == paymentID && ch.Status == providersim.StatusSucceeded {
			ids = append(ids, ch.ID)
		}
	}
	return ids, nil
}

// auditTrail reads payment id's audit rows (payment_attempt_events: every
// transition, with its reason), which the API does not expose.
func (d *Demo) auditTrail(ctx context.Context, id string) (string, error) {
	conn, err := pgx.Connect(ctx, d.dbURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT to_status, reason FROM payment_attempt_events WHERE attempt_id = $1 ORDER BY id", id)
	if err != nil {
		return "", err
	}
	var steps []string
	for rows.Next() {
		var status, reason string
		if err := rows.Scan(&status, &reason); err != nil {
			return "", err
		}
		steps = append(steps, status+" ("+reason+")")
	}
	return strings.Join(steps, " → "), rows.Err()
}

// providerTally is one order's line of the account across both providers.
type providerTally struct {
	OrderID  string         `json:"order_id"`
	Status   string         `json:"status"`
	Provider string         `json:"provider"`
	Charges  map[string]int `json:"charges"` // succeeded charges per provider
}

// tallyProviders prints every order of the demo with its payment's provider
// and the succeeded charges each provider holds for it: one per paid order,
// at the provider the payment records, and none anywhere else.
func (d *Demo) tallyProviders(ctx context.Context) error {
	payments, err := d.client.allPayments(ctx, d.podB)
	if err != nil {
		return err
	}
	byRef := map[string]map[string]int{} // payment id → provider → succeeded charges
	total := map[string]int{}
	ours := map[string]bool{}
	for _, p := range payments {
		ours[p.ID] = true
	}
	orphans := 0
	for _, s := range []struct {
		name string
		sim  simulator
	}{{providerA, d.sim}, {providerB, d.simB}} {
		charges, err := s.sim.charges(ctx)
		if err != nil {
			return err
		}
		for _, ch := range charges {
			if ch.Status != providersim.StatusSucceeded {
				continue
			}
			total[s.name]++
			if !ours[ch.Reference] {
				orphans++
				continue
			}
			if byRef[ch.Reference] == nil {
				byRef[ch.Reference] = map[string]int{}
			}
			byRef[ch.Reference][s.name]++
		}
	}
	var (
		lines  []providerTally
		paid   int
		onceOK = true
	)
	for _, p := range payments {
		t := providerTally{OrderID: p.OrderID, Status: p.Status, Charges: map[string]int{providerA: 0, providerB: 0}}
		if p.Provider != nil {
			t.Provider = *p.Provider
		}
		n := 0
		for name, c := range byRef[p.ID] {
			t.Charges[name] = c
			n += c
		}
		if p.Status == "SUCCEEDED" {
			paid++
			onceOK = onceOK && n == 1 && t.Charges[t.Provider] == 1
		} else {
			onceOK = onceOK && n == 0
		}
		lines = append(lines, t)
	}
	b, _ := json.Marshal(lines)
	fmt.Fprintf(d.out, "\nevery order: %s\n", b)
	fmt.Fprintf(d.out, "providers: %s %d charges, %s %d charges, %d of no payment; %d paid orders, each charged exactly once, at its provider: %v\n",
		providerA, total[providerA], providerB, total[providerB], orphans, paid, onceOK)
	return nil
}
