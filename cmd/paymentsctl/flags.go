package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/acme/paymentsvc/internal/envflag"
)

// flags are one command's settings.
type flags struct {
	set     *envflag.Set
	cmd     string
	url     *string
	apiKey  *string
	timeout *time.Duration

	orderID, currency, paymentMethod, key *string
	captureMethod, reason                 *string
	amount                                *amountFlag
	sync                                  *bool
	limit                                 *int
}

func newFlags(cmd string, getenv func(string) (string, bool)) *flags {
	set := envflag.NewWithLookup("paymentsctl "+cmd, getenv)
	set.SetUsageHeader(usage + fmt.Sprintf("\nFlags of %q:", cmd))
	f := &flags{set: set, cmd: cmd}
	f.url = set.String("PAYMENTS_URL", "http://127.0.0.1:8080", "base URL of paymentsvc; a comma-separated list is tried in turn")
	f.apiKey = set.Secret("PAYMENTS_API_KEY", "", "the tenant's API key (sk_…)")
	fs := set.FlagSet()
	f.timeout = fs.Duration("timeout", 60*time.Second, "give up (exit 4 for pay and refund) when not final after this long")
	switch cmd {
	case "pay":
		f.orderID = fs.String("order-id", "", "the order's id (required)")
		f.amount = &amountFlag{}
		fs.Var(f.amount, "amount", "the amount, `N` in the currency's minor unit (required)")
		f.currency = fs.String("currency", "", "ISO 4217 code, upper case (required)")
		f.paymentMethod = fs.String("payment-method", "", "the provider's payment method (required), e.g. pm_card_visa")
		f.key = fs.String("idempotency-key", "", "the payment's key; default: a new one, printed on stderr")
		f.captureMethod = fs.String("capture-method", "automatic", "automatic (charge at once) or manual (only authorize: capture or void it later)")
	case "capture":
		f.amount = &amountFlag{}
		fs.Var(f.amount, "amount", "the amount to capture, `N` in minor units; default: all that is authorized")
		f.key = fs.String("idempotency-key", "", "the capture's key; default ctl-capture-<PAYMENT_ID>-<N or all>")
	case "void":
		f.reason = fs.String("reason", "", "why: duplicate, fraudulent, requested_by_customer or abandoned; default none")
		f.key = fs.String("idempotency-key", "", "the void's key; default ctl-void-<PAYMENT_ID>")
	case "refund":
		f.amount = &amountFlag{}
		fs.Var(f.amount, "amount", "the amount to refund, `N` in minor units; default: the whole refundable rest")
		f.key = fs.String("idempotency-key", "", "the refund's key; default ctl-<PAYMENT_ID>-<N or rest>")
	case "get":
		f.sync = fs.Bool("sync", false, "ask the provider first about a PENDING or UNKNOWN payment or operation, or an AUTHORIZED payment")
	case "list":
		f.orderID = fs.String("order-id", "", "only this order's payments")
		f.limit = fs.Int("limit", 100, "print at most this many payments; 0: all")
	}
	return f
}

// check refuses what no call could use; positional are the arguments that
// are not flags.
func (f *flags) check(positional []string) error {
	var errs []error
	wantArgs := map[string]int{"pay": 0, "refund": 1, "capture": 1, "void": 1, "get": 1, "list": 0}[f.cmd]
	if len(positional) != wantArgs {
		errs = append(errs, fmt.Errorf("want %d argument(s), got %q", wantArgs, positional))
	}
	if *f.timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %s is not positive", *f.timeout))
	}
	if len(splitURLs(*f.url)) == 0 {
		errs = append(errs, errors.New("--payments-url is empty"))
	}
	switch f.cmd {
	case "pay":
		for name, v := range map[string]string{"--order-id": *f.orderID, "--currency": *f.currency, "--payment-method": *f.paymentMethod} {
			if v == "" {
				errs = append(errs, fmt.Errorf("%s is required", name))
			}
		}
		if !f.amount.set || f.amount.n <= 0 {
			errs = append(errs, errors.New("--amount N is required: a positive integer"))
		}
		if *f.captureMethod != "automatic" && *f.captureMethod != "manual" {
			errs = append(errs, fmt.Errorf("--capture-method must be automatic or manual, got %q", *f.captureMethod))
		}
	case "refund", "capture":
		if f.amount.set && f.amount.n <= 0 {
			errs = append(errs, fmt.Errorf("--amount must be a positive integer, got %d", f.amount.n))
		}
	case "void":
		if r := *f.reason; r != "" && r != "duplicate" && r != "fraudulent" && r != "requested_by_customer" && r != "abandoned" {
			errs = append(errs, fmt.Errorf("--reason must be duplicate, fraudulent, requested_by_customer or abandoned, got %q", r))
		}
	case "list":
		if *f.limit < 0 {
			errs = append(errs, fmt.Errorf("--limit %d is negative", *f.limit))
		}
	}
	return errors.Join(errs...)
}

// parseInterleaved parses flags that come before and after the positional
// arguments (refund PAYMENT_ID --amount 200) and returns the positional ones.
func parseInterleaved(set *envflag.Set, args []string, stderr io.Writer) ([]string, error) {
	var positional []string
	for {
		if err := set.Parse(args, stderr); err != nil {
			return nil, err
		}
		rest := set.FlagSet().Args()
		if len(rest) == 0 {
			return positional, nil
		}
		positional, args = append(positional, rest[0]), rest[1:]
	}
}

// splitURLs splits PAYMENTS_URL's comma-separated list.
func splitURLs(s string) []string {
	var urls []string
	for u := range strings.SplitSeq(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	return urls
}

// amountFlag is an amount in minor units that knows whether it was given:
// refund's default (the whole rest) is its absence, not a 0.
type amountFlag struct {
	n   int64
	set bool
}

func (a *amountFlag) String() string {
	if a == nil || !a.set {
		return ""
	}
	return strconv.FormatInt(a.n, 10)
}

func (a *amountFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return errors.New("not an integer")
	}
	a.n, a.set = n, true
	return nil
}
