// Command paymentsctl pays, refunds, captures, voids and reads payments
// from the command line, through the Go client (package client) and so by
// its rules: one Idempotency-Key per payment or operation, reused on every
// retry, never a new one because a try timed out. It prints the last
// payment (or refund, capture, void) as JSON on stdout, the key as a line
// idempotency_key=K on stderr before the first try, and exits 0 SUCCEEDED
// (or, for pay --capture-method manual, AUTHORIZED), 3 FAILED (or
// CANCELED), 4 not final at the deadline, 1 on any other refusal, 2 on bad
// usage.
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
	exitFailed    = 3 // the payment or operation is FAILED (or the payment CANCELED)
	exitNotFinal  = 4 // not final at the deadline, or nothing answered
)

const usage = `Usage: paymentsctl COMMAND [flags] [ARG]

Commands:
  pay --order-id O --amount N --currency C --payment-method PM [--capture-method automatic|manual]
      [--idempotency-key K] [--timeout 60s]
        charge a payment (manual: only authorize it, to capture or void later);
        without --idempotency-key a new key is minted
  refund PAYMENT_ID [--amount N] [--idempotency-key K] [--timeout 60s]
        refund N minor units (default: the whole refundable rest); the default
        key is ctl-<PAYMENT_ID>-<N or rest>, so running the same command again
        never refunds twice
  capture PAYMENT_ID [--amount N] [--idempotency-key K] [--timeout 60s]
        capture N minor units of an AUTHORIZED payment (default: all); the
        default key is ctl-capture-<PAYMENT_ID>-<N or all>
  void PAYMENT_ID [--reason R] [--idempotency-key K] [--timeout 60s]
        void an AUTHORIZED payment (R: duplicate, fraudulent,
        requested_by_customer, abandoned); the default key is ctl-void-<PAYMENT_ID>
  get PAYMENT_ID|REFUND_ID|CAPTURE_ID|VOID_ID [--sync] [--timeout 60s]
        print a payment (or a refund rfd_…, a capture cap_…, a void void_…);
        --sync asks the provider first
  list [--order-id O] [--limit 100] [--timeout 60s]
        print the tenant's payments (the order's), newest first, one JSON per line

Every command reads PAYMENTS_URL (default http://127.0.0.1:8080; a comma-separated
list is tried in turn: the first try to the first URL, each retry to the next) and
PAYMENTS_API_KEY, overridden by --payments-url and --payments-api-key.

pay, refund, capture and void retry with the same key (connection errors,
timeouts, 409 idempotency_key_in_use after Retry-After, 429, 5xx, 202) until
the payment (or operation) is final or --timeout passes (pay --capture-method
manual stops at AUTHORIZED). They print the key on stderr as the line
"idempotency_key=K" before the first try: run the command again with
--idempotency-key K to resume.

Exit status: 0 SUCCEEDED (pay --capture-method manual: AUTHORIZED; get, list:
printed), 3 FAILED (or CANCELED), 4 not final at the deadline (or nothing
answered), 1 refused (the problem is printed on stdout), 2 bad usage.
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
	case "pay", "refund", "capture", "void", "get", "list":
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
	case "capture":
		return capture(ctx, c, f, positional[0], o)
	case "void":
		return void(ctx, c, f, positional[0], o)
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
	req := client.CreatePaymentRequest{
		OrderID: *f.orderID, Amount: f.amount.n, Currency: *f.currency, PaymentMethod: *f.paymentMethod,
	}
	if *f.captureMethod == string(client.CaptureManual) {
		// automatic is left out, so that the flag spelled out or not is the
		// same request for a resumed key.
		req.CaptureMethod = client.CaptureManual
	}
	p, err := c.CreatePayment(ctx, key, req)
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

func capture(ctx context.Context, c *client.Client, f *flags, paymentID string, o *out) int {
	var req client.CreateCaptureRequest
	key := *f.key
	if f.amount.set {
		req.Amount = &f.amount.n
	}
	if key == "" {
		key = "ctl-capture-" + paymentID + "-all"
		if f.amount.set {
			key = fmt.Sprintf("ctl-capture-%s-%d", paymentID, f.amount.n)
		}
	}
	o.key(key)
	v, err := c.CreateCapture(ctx, paymentID, key, req)
	if nf, ok := errors.AsType[*client.NotFinalError](err); ok && nf.Capture != nil {
		o.json(nf.Capture)
	}
	if err != nil {
		return o.failure(err, true)
	}
	o.json(v)
	return finalCode(v.Status)
}

func void(ctx context.Context, c *client.Client, f *flags, paymentID string, o *out) int {
	key := *f.key
	if key == "" {
		key = "ctl-void-" + paymentID
	}
	o.key(key)
	v, err := c.CreateVoid(ctx, paymentID, key, client.CreateVoidRequest{Reason: client.VoidReason(*f.reason)})
	if nf, ok := errors.AsType[*client.NotFinalError](err); ok && nf.Void != nil {
		o.json(nf.Void)
	}
	if err != nil {
		return o.failure(err, true)
	}
	o.json(v)
	return finalCode(v.Status)
}

// getters read an object by the prefix of its id, plainly or with ?sync=true.
var getters = []struct {
	prefix      string
	get, synced func(*client.Client, context.Context, string) (any, error)
}{
	{"rfd_", anyOf((*client.Client).GetRefund), anyOf((*client.Client).SyncRefund)},
	{"cap_", anyOf((*client.Client).GetCapture), anyOf((*client.Client).SyncCapture)},
	{"void_", anyOf((*client.Client).GetVoid), anyOf((*client.Client).SyncVoid)},
	{"", anyOf((*client.Client).GetPayment), anyOf((*client.Client).SyncPayment)},
}

// anyOf is a client read returning its object as any.
func anyOf[T any](read func(*client.Client, context.Context, string) (*T, error)) func(*client.Client, context.Context, string) (any, error) {
	return func(c *client.Client, ctx context.Context, id string) (any, error) {
		return read(c, ctx, id)
	}
}

func get(ctx context.Context, c *client.Client, f *flags, id string, o *out) int {
	for _, g := range getters {
		if !strings.HasPrefix(id, g.prefix) {
			continue
		}
		read := g.get
		if *f.sync {
			read = g.synced
		}
		v, err := read(c, ctx, id)
		if err != nil {
			return o.failure(err, false)
		}
		o.json(v)
		return 0
	}
	return exitUsage // unreachable: the last getter takes every id
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
	if s == client.StatusSucceeded || s == client.StatusAuthorized {
		return exitSucceeded
	}
	return exitFailed // the creates return only answered ones: FAILED or CANCELED here
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
// stdout (1); a call that did not finish is 4 for pay, refund, capture and
// void (create), 1 for reads.
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
