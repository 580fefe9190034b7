// Command paymentsctl pays, refunds and reads payments from the command
// line, through the Go client (package client) and so by its rules: one
// Idempotency-Key per payment or refund, reused on every retry, never a new
// one because a try timed out. It prints the last payment (or refund) as
// JSON on stdout, the key as a line idempotency_key=K on stderr before the
// first try, and exits 0 SUCCEEDED, 3 FAILED, 4 not final at the deadline, 1
// on any other refusal, 2 on bad usage.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/acme/paymentsvc/client"
	"github.com/acme/paymentsvc/internal/envflag"
)

// Exit statuses.
const (
	exitSucceeded = 0
	exitRefused   = 1 // a refusal (problem) or, for get and list, any failure
	exitUsage     = 2
	exitFailed    = 3 // the payment or refund is FAILED
	exitNotFinal  = 4 // not final at the deadline, or nothing answered
)

const usage = `Usage: paymentsctl COMMAND [flags] [ARG]

Commands:
  pay --order-id O --amount N --currency C --payment-method PM [--idempotency-key K] [--timeout 60s]
        charge a payment; without --idempotency-key a new key is minted
  refund PAYMENT_ID [--amount N] [--idempotency-key K] [--timeout 60s]
        refund N minor units (default: the whole refundable rest); the default
        key is ctl-<PAYMENT_ID>-<N or rest>, so running the same command again
        never refunds twice
  get PAYMENT_ID|REFUND_ID [--sync] [--timeout 60s]
        print a payment (or a refund: rfd_…); --sync asks the provider first
  list [--order-id O] [--limit 100] [--timeout 60s]
        print the tenant's payments (the order's), newest first, one JSON per line

Every command reads PAYMENTS_URL (default http://127.0.0.1:8080; a comma-separated
list is tried in turn: the first try to the first URL, each retry to the next) and
PAYMENTS_API_KEY, overridden by --payments-url and --payments-api-key.

pay and refund retry with the same key (connection errors, timeouts, 409
idempotency_key_in_use after Retry-After, 429, 5xx, 202) until the payment is
final or --timeout passes. They print the key on stderr as idempotency_key=K
before the first try: run the command again with --idempotency-key K to resume.

Exit status: 0 SUCCEEDED (get, list: printed), 3 FAILED, 4 not final at the
deadline (or nothing answered), 1 refused (the problem is printed on stdout),
2 bad usage.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process: it returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stderr, usage)
		return 0
	case "pay", "refund", "get", "list":
	default:
		fmt.Fprintf(stderr, "paymentsctl: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
	f := newFlags(cmd, getenv)
	positional, err := parseInterleaved(f.set, args, stderr)
	if err != nil {
		return envflag.ExitCode(err)
	}
	if err := f.check(positional); err != nil {
		fmt.Fprintf(stderr, "paymentsctl %s: %v\n", cmd, err)
		return exitUsage
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("command", cmd)
	c, err := client.New(client.Config{URLs: splitURLs(*f.url), APIKey: *f.apiKey, Timeout: *f.timeout, Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "paymentsctl %s: --payments-url: %v\n", cmd, err)
		return exitUsage
	}
	o := &out{stdout: stdout, stderr: stderr, log: log}
	switch cmd {
	case "pay":
		return pay(ctx, c, f, o)
	case "refund":
		return refund(ctx, c, f, positional[0], o)
	case "get":
		return get(ctx, c, f, positional[0], o)
	default:
		return list(ctx, c, f, o)
	}
}

func pay(ctx context.Context, c *client.Client, f *flags, o *out) int {
	key := *f.key
	if key == "" {
		key = client.NewKey()
	}
	o.key(key)
	p, err := c.CreatePayment(ctx, key, client.CreatePaymentRequest{
		OrderID: *f.orderID, Amount: f.amount.n, Currency: *f.currency, PaymentMethod: *f.paymentMethod,
	})
	if nf, ok := errors.AsType[*client.NotFinalError](err); ok && nf.Payment != nil {
		o.json(nf.Payment)
	}
	if err != nil {
		return o.failure(err, true)
	}
	o.json(p)
	return finalCode(p.Status)
}

func refund(ctx context.Context, c *client.Client, f *flags, paymentID string, o *out) int {
	var req client.CreateRefundRequest
	key := *f.key
	if f.amount.set {
		req.Amount = &f.amount.n
		if key == "" {
			key = fmt.Sprintf("ctl-%s-%d", paymentID, f.amount.n)
		}
	} else if key == "" {
		key = "ctl-" + paymentID + "-rest"
	}
	o.key(key)
	r, err := c.CreateRefund(ctx, paymentID, key, req)
	if nf, ok := errors.AsType[*client.NotFinalError](err); ok && nf.Refund != nil {
		o.json(nf.Refund)
	}
	if err != nil {
		return o.failure(err, true)
	}
	o.json(r)
	return finalCode(r.Status)
}

func get(ctx context.Context, c *client.Client, f *flags, id string, o *out) int {
	var (
		v   any
		err error
	)
	switch {
	case strings.HasPrefix(id, "rfd_") && *f.sync:
		v, err = c.SyncRefund(ctx, id)
	case strings.HasPrefix(id, "rfd_"):
		v, err = c.GetRefund(ctx, id)
	case *f.sync:
		v, err = c.SyncPayment(ctx, id)
	default:
		v, err = c.GetPayment(ctx, id)
	}
	if err != nil {
		return o.failure(err, false)
	}
	o.json(v)
	return 0
}

func list(ctx context.Context, c *client.Client, f *flags, o *out) int {
	params := client.ListPaymentsParams{OrderID: *f.orderID, Limit: min(max(*f.limit, 0), 100)}
	n := 0
	for p, err := range c.ListPayments(ctx, params) {
		if err != nil {
			return o.failure(err, false)
		}
		if *f.limit > 0 && n == *f.limit {
			break
		}
		n++
		b, _ := json.Marshal(p)
		fmt.Fprintf(o.stdout, "%s\n", b)
	}
	return 0
}

func finalCode(s client.Status) int {
	if s == client.StatusSucceeded {
		return exitSucceeded
	}
	return exitFailed // CreatePayment and CreateRefund return only final ones
}

// out writes what a command prints.
type out struct {
	stdout, stderr io.Writer
	log            *slog.Logger
}

// key prints the idempotency key, before the first try: whatever happens
// next, the operator can resume with it.
func (o *out) key(k string) { fmt.Fprintf(o.stderr, "idempotency_key=%s\n", k) }

func (o *out) json(v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		o.log.Error("encode output", "err", err)
		return
	}
	fmt.Fprintf(o.stdout, "%s\n", b)
}

// failure reports err and returns the exit status: a problem is printed on
// stdout (1); a call that did not finish is 4 for pay and refund (create),
// 1 for reads.
func (o *out) failure(err error, create bool) int {
	// First: a call that did not finish wraps the problem of its last try
	// (409 idempotency_key_in_use, 503, …), which is no refusal.
	if nf, ok := errors.AsType[*client.NotFinalError](err); ok {
		if !create {
			o.log.Error("no answer before the deadline", "tries", nf.Tries, "err", err)
			return exitRefused
		}
		o.log.Error("not final at the deadline: run the command again with --idempotency-key to resume",
			"idempotency_key", nf.IdempotencyKey, "tries", nf.Tries, "err", err)
		return exitNotFinal
	}
	if p, ok := errors.AsType[*client.Problem](err); ok {
		o.json(p)
		o.log.Error("refused", "status", p.Status, "code", p.Code, "detail", p.Detail, "request_id", p.RequestID)
		return exitRefused
	}
	o.log.Error("failed", "err", err)
	return exitRefused
}
