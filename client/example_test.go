package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/acme/paymentsvc/client"
)

// order stands for the checkout's own order row.
type order struct {
	ID         string
	PaymentKey string // the payment intent's idempotency key, stored before the first try
}

// saveOrder stands for the checkout's UPDATE of the order row.
func saveOrder(o *order) error { return nil }

// A checkout pays an order: the key is stored with the order before the
// first try, so that whatever happens next (a timeout, a crash, a deploy)
// the payment is resumed with the same key and charged at most once.
func Example() {
	c, err := client.New(client.Config{
		URLs:    []string{"http://127.0.0.1:8080"},
		APIKey:  "sk_…",
		Timeout: 30 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	o := &order{ID: "o-1"}
	if o.PaymentKey == "" { // a new intent; a resumed one keeps its key
		o.PaymentKey = client.NewKey()
		if err := saveOrder(o); err != nil { // before the first try
			log.Fatal(err)
		}
	}
	p, err := c.CreatePayment(ctx, o.PaymentKey, client.CreatePaymentRequest{
		OrderID: o.ID, Amount: 500, Currency: "USD", PaymentMethod: "pm_card_visa",
	})
	var notFinal *client.NotFinalError
	switch {
	case errors.As(err, &notFinal):
		// Not final in time: keep o.PaymentKey and resume later with it.
		fmt.Println("still processing; resume with", notFinal.IdempotencyKey)
	case client.CodeOf(err) == client.CodeOrderAlreadyHasPayment:
		fmt.Println("the order is already paid or being paid")
	case err != nil:
		log.Fatal(err) // a refusal retrying cannot change, e.g. invalid_request
	case p.Status == client.StatusSucceeded:
		fmt.Println("charged", p.ID)
	default: // FAILED: a declined card ends this intent; the next attempt gets a new key
		fmt.Println("declined:", *p.FailureCode)
	}
}

// Iterate over an order's payments, page after page.
func ExampleClient_ListPayments() {
	c, err := client.New(client.Config{URLs: []string{"http://127.0.0.1:8080"}, APIKey: "sk_…"})
	if err != nil {
		log.Fatal(err)
	}
	for p, err := range c.ListPayments(context.Background(), client.ListPaymentsParams{OrderID: "o-1"}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(p.ID, p.Status, p.Amount, p.AmountRefunded)
	}
}

// Refund 200 cents of a payment. The key names the refund intent, so
// running this twice refunds once.
func ExampleClient_CreateRefund() {
	c, err := client.New(client.Config{URLs: []string{"http://127.0.0.1:8080"}, APIKey: "sk_…"})
	if err != nil {
		log.Fatal(err)
	}
	paymentID := "pay_…"
	r, err := c.CreateRefund(context.Background(), paymentID, "refund-"+paymentID+"-ticket-42", client.CreateRefundRequest{
		Amount: new(int64(200)),
		Reason: client.ReasonRequestedByCustomer,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.ID, r.Status)
}

// Two base URLs: the first try goes to the first, each retry to the next.
func ExampleNew() {
	c, err := client.New(client.Config{
		URLs:       []string{"http://pod-a:8080", "http://pod-b:8080"},
		APIKey:     "sk_…",
		TryTimeout: 2 * time.Second,  // one HTTP request
		Timeout:    60 * time.Second, // the whole call, retries and waits included
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = c
}
