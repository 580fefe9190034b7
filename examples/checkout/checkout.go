package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acme/paymentsvc/client"
)

// schema is the checkout's own table. payment_key and payment_method are
// the payment intent in flight: the key and the request it was first sent
// with, written before the first try and cleared only when the intent ends
// in a decline (so that the next attempt, a new intent, gets a new key).
const schema = `
CREATE TABLE IF NOT EXISTS checkout_orders (
	id             text PRIMARY KEY,
	amount         bigint NOT NULL CHECK (amount > 0),
	currency       text NOT NULL,
	status         text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'paid')),
	payment_key    text,
	payment_method text,
	payment_id     text,
	failure_code   text
)`

// Order is a row of checkout_orders.
type Order struct {
	ID            string  `json:"id"`
	Amount        int64   `json:"amount"`
	Currency      string  `json:"currency"`
	Status        string  `json:"status"`                   // open, paid
	PaymentKey    *string `json:"payment_key,omitempty"`    // the intent in flight
	PaymentMethod *string `json:"payment_method,omitempty"` // the intent's payment method
	PaymentID     *string `json:"payment_id,omitempty"`
	FailureCode   *string `json:"failure_code,omitempty"` // the last decline
}

// Checkout pays orders through the payments service.
type Checkout struct {
	DB       *pgxpool.Pool
	Payments *client.Client
}

// Migrate creates the checkout's table.
func (c *Checkout) Migrate(ctx context.Context) error {
	_, err := c.DB.Exec(ctx, schema)
	return err
}

// Errors of Pay.
var (
	ErrOrderNotFound = errors.New("order not found")
	ErrNoMethod      = errors.New("a payment method is required")
)

// Pay pays the order with method and returns the order as it is afterwards.
//
// The intent's key is committed with the order before the first try. If an
// intent is already in flight (an earlier call timed out, or the process
// died mid-call), Pay resumes that one, with its key and its payment method,
// instead of starting another: a new key for the same order could charge
// the customer twice. Only when it ends FAILED does the next call start a
// new intent with a new key.
func (c *Checkout) Pay(ctx context.Context, orderID, method string) (*Order, error) {
	o, err := c.beginIntent(ctx, orderID, method)
	if err != nil || o.Status == "paid" {
		return o, err
	}
	key := *o.PaymentKey
	p, err := c.Payments.CreatePayment(ctx, key, client.CreatePaymentRequest{
		OrderID: o.ID, Amount: o.Amount, Currency: o.Currency, PaymentMethod: *o.PaymentMethod,
	})
	switch {
	case err == nil && p.Status == client.StatusSucceeded:
		return c.endIntent(ctx, o.ID, key, `UPDATE checkout_orders SET status = 'paid', payment_id = $3, failure_code = NULL
			WHERE id = $1 AND payment_key = $2`, p.ID)
	case err == nil: // FAILED: this intent is over; the next attempt is a new one
		return c.endIntent(ctx, o.ID, key, `UPDATE checkout_orders SET payment_key = NULL, payment_method = NULL,
			payment_id = $3, failure_code = $4 WHERE id = $1 AND payment_key = $2`, p.ID, p.FailureCode)
	case client.CodeOf(err) == client.CodeInvalidRequest:
		// Refused before anything ran (and never stored): the request itself
		// is wrong, so this intent can never succeed.
		if _, cerr := c.endIntent(ctx, o.ID, key, `UPDATE checkout_orders SET payment_key = NULL, payment_method = NULL
			WHERE id = $1 AND payment_key = $2`); cerr != nil {
			return nil, cerr
		}
		return nil, err
	default:
		// Not final in time (*client.NotFinalError), or a refusal an operator
		// must look at: the key stays with the order, and the next Pay or
		// ResumePending carries on with it.
		return o, err
	}
}

// ResumePending resumes every order with an intent in flight, with its
// stored key: what a checkout runs at startup and from time to time, so
// that a payment left unfinished by a crash or a timeout is finished
// without waiting for the customer.
func (c *Checkout) ResumePending(ctx context.Context) (resumed int, err error) {
	rows, err := c.DB.Query(ctx, `SELECT id FROM checkout_orders WHERE status = 'open' AND payment_key IS NOT NULL ORDER BY id`)
	if err != nil {
		return 0, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, id := range ids {
		if _, err := c.Pay(ctx, id, ""); err != nil {
			errs = append(errs, fmt.Errorf("order %s: %w", id, err))
			continue
		}
		resumed++
	}
	return resumed, errors.Join(errs...)
}

// beginIntent returns the order with its intent in flight: the one already
// there, or a new one (a new key and method) committed before it returns,
// that is, before the first try.
func (c *Checkout) beginIntent(ctx context.Context, orderID, method string) (*Order, error) {
	var o *Order
	err := pgx.BeginFunc(ctx, c.DB, func(tx pgx.Tx) error {
		var err error
		o, err = readOrder(ctx, tx, orderID, "FOR UPDATE")
		if err != nil || o.Status == "paid" || o.PaymentKey != nil {
			return err
		}
		if method == "" {
			return ErrNoMethod
		}
		key := client.NewKey()
		_, err = tx.Exec(ctx, `UPDATE checkout_orders SET payment_key = $2, payment_method = $3 WHERE id = $1`, orderID, key, method)
		o.PaymentKey, o.PaymentMethod = &key, &method
		return err
	})
	return o, err
}

// endIntent runs an update conditional on the intent still being key's and
// returns the order.
func (c *Checkout) endIntent(ctx context.Context, orderID, key, update string, args ...any) (*Order, error) {
	if _, err := c.DB.Exec(ctx, update, append([]any{orderID, key}, args...)...); err != nil {
		return nil, err
	}
	return readOrder(ctx, c.DB, orderID, "")
}

// CreateOrder stores a new open order.
func (c *Checkout) CreateOrder(ctx context.Context, o Order) (*Order, error) {
	_, err := c.DB.Exec(ctx, `INSERT INTO checkout_orders (id, amount, currency) VALUES ($1, $2, $3)`, o.ID, o.Amount, o.Currency)
	if err != nil {
		return nil, err
	}
	return readOrder(ctx, c.DB, o.ID, "")
}

// Order reads an order.
func (c *Checkout) Order(ctx context.Context, id string) (*Order, error) {
	return readOrder(ctx, c.DB, id, "")
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func readOrder(ctx context.Context, q querier, id, lock string) (*Order, error) {
	var o Order
	err := q.QueryRow(ctx, `SELECT id, amount, currency, status, payment_key, payment_method, payment_id, failure_code
		FROM checkout_orders WHERE id = $1 `+lock, id).
		Scan(&o.ID, &o.Amount, &o.Currency, &o.Status, &o.PaymentKey, &o.PaymentMethod, &o.PaymentID, &o.FailureCode)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrOrderNotFound
	}
	return &o, err
}

// Handler serves the checkout's HTTP API:
//
//	POST /orders            {"id":"o-1","amount":500,"currency":"USD"}      201 the order
//	POST /orders/{id}/pay   {"payment_method":"pm_card_visa"}               200 paid · 402 declined · 202 processing
//	GET  /orders/{id}                                                       200 the order
func (c *Checkout) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		var o Order
		if err := json.NewDecoder(r.Body).Decode(&o); err != nil || o.ID == "" || o.Amount <= 0 || o.Currency == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want {id, amount, currency}"})
			return
		}
		created, err := c.CreateOrder(r.Context(), o)
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusCreated, created)
	})
	mux.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		o, err := c.Order(r.Context(), r.PathValue("id"))
		switch {
		case errors.Is(err, ErrOrderNotFound):
			writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		case err != nil:
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		default:
			writeJSON(w, http.StatusOK, o)
		}
	})
	mux.HandleFunc("POST /orders/{id}/pay", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			PaymentMethod string `json:"payment_method"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want {payment_method}"})
			return
		}
		o, err := c.Pay(r.Context(), r.PathValue("id"), body.PaymentMethod)
		var notFinal *client.NotFinalError
		switch {
		case errors.As(err, &notFinal):
			writeJSON(w, http.StatusAccepted, o) // processing: ask again, or let ResumePending finish it
		case errors.Is(err, ErrOrderNotFound):
			writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		case errors.Is(err, ErrNoMethod):
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		case err != nil:
			writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error(), "code": string(client.CodeOf(err))})
		case o.Status == "paid":
			writeJSON(w, http.StatusOK, o)
		default:
			writeJSON(w, http.StatusPaymentRequired, o) // declined: the customer may try another card
		}
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
