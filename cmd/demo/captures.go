package main

import (
	"context"
	"fmt"
	"net/http"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/providersim"
)

// Scenario 7: authorize now, capture later. A manual payment is only
// authorized (the provider holds the amount); its capture's answer is lost
// (202 UNKNOWN: the payment stays AUTHORIZED, held for it); the client
// retries the capture with the same key and the provider, which captured
// under the capture's derived key, answers with what it did: captured once.
func (d *Demo) captureAnswerLost(ctx context.Context) error {
	fmt.Fprintln(d.out, "\n== 7. authorize now, capture later: the capture's answer is lost; the client retries it with the same key")
	body := apiclient.Visa("o-16", 800)
	body.CaptureMethod = "manual"
	held, err := d.client.pay(ctx, d.podA, "key-o-16", body, patient)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "pay o-16 (capture_method manual) -> %s\n", held)
	if held.HTTPStatus != http.StatusCreated || held.Status != "AUTHORIZED" {
		return fmt.Errorf("scenario 7: authorizing o-16 answered %s", held)
	}
	before, err := d.sim.stats(ctx)
	if err != nil {
		return err
	}
	faults := providersim.Faults{DropAfterCommit: true, Captures: true}
	if err := d.sim.setFaultSet(ctx, faults); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  PUT /_sim/faults on %s %s: it captures, then closes the connection without answering\n", providerA, faultsJSON(faults))

	const key = "key-capture-o-16"
	first, err := d.client.capture(ctx, d.podA, held.PaymentID, key, 500)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "capture attempt 1 -> %s\n", first)
	p, err := d.client.get(ctx, d.podB, "/v1/payments/"+held.PaymentID)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  payment o-16 meanwhile: status %s, amount_capturable %v\n", p.Str("status"), p.JSON["amount_capturable"])
	if err := d.sim.clearFaults(ctx); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  %s faults cleared\n", providerA)

	retried, err := retry(ctx, d, "capture retry, same key", func() (opAnswer, error) {
		return d.client.capture(ctx, d.podB, held.PaymentID, key, 500)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  same capture as attempt 1: %v\n", retried.id() != "" && retried.id() == first.id())
	again, err := d.client.capture(ctx, d.podA, held.PaymentID, key, 500)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "capture retry again -> %s\n", again)

	after, err := d.sim.stats(ctx)
	if err != nil {
		return err
	}
	charges, err := d.sim.charges(ctx)
	if err != nil {
		return err
	}
	var captured int64
	for _, ch := range charges {
		if ch.ID == held.Charge {
			captured = ch.AmountCaptured
		}
	}
	if p, err = d.client.get(ctx, d.podB, "/v1/payments/"+held.PaymentID); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "provider %s: charge %s captured %d of 800 authorized, for %d capture calls\n",
		providerA, held.Charge, captured, after.CaptureCalls-before.CaptureCalls)
	fmt.Fprintf(d.out, "payment o-16: status %s, amount_captured %v, amount_refundable %v\n",
		p.Str("status"), p.JSON["amount_captured"], p.JSON["amount_refundable"])
	return nil
}
