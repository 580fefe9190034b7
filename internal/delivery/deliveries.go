package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/db"
)

// The statuses of a delivery.
const (
	StatusPending   = "pending"
	StatusDelivered = "delivered"
	StatusFailed    = "failed"
)

// Delivery is one event to one endpoint, as the deliveries API shows it.
type Delivery struct {
	ID             string     `json:"id"`
	EndpointID     string     `json:"endpoint_id"`
	EventID        string     `json:"event_id"`
	EventType      string     `json:"event_type"`
	Status         string     `json:"status"`
	Attempts       int        `json:"attempts"`
	LastStatusCode *int       `json:"last_status_code"`
	LastError      *string    `json:"last_error"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"` // null unless pending
	DeliveredAt    *time.Time `json:"delivered_at"`
	CreatedAt      time.Time  `json:"created_at"`
	PaymentID      string     `json:"-"` // the payment the event is about
}

func deliveryOf(r db.WebhookDelivery) Delivery {
	d := Delivery{
		ID: r.ID, EndpointID: r.EndpointID, EventID: r.EventID, EventType: r.EventType, Status: r.Status,
		Attempts: int(r.Attempts), LastError: r.LastError, CreatedAt: second(r.CreatedAt), PaymentID: r.PaymentID,
	}
	if r.LastStatusCode != nil {
		c := int(*r.LastStatusCode)
		d.LastStatusCode = &c
	}
	if r.NextAttemptAt != nil && r.Status == StatusPending {
		t := second(*r.NextAttemptAt)
		d.NextAttemptAt = &t
	}
	if r.DeliveredAt != nil {
		t := second(*r.DeliveredAt)
		d.DeliveredAt = &t
	}
	return d
}

// second is t as the API shows times: UTC, to the second.
func second(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// Deliveries returns a page of the deliveries to the tenant's endpoint
// endpointID (404 if it is not the tenant's, or deleted), newest first, after
// the delivery after ("" for the first page; 400 if it is none of this
// endpoint's), and whether more follow.
func (s *Endpoints) Deliveries(ctx context.Context, tenantID, endpointID, after string, limit int) ([]Delivery, bool, error) {
	if _, err := s.Get(ctx, tenantID, endpointID); err != nil {
		return nil, false, err
	}
	p := db.DeliveryListPageParams{EndpointID: endpointID, MaxRows: int32(limit + 1)}
	if after != "" {
		cur, err := db.Q.DeliveryGetForTenant(ctx, s.pool, db.DeliveryGetForTenantParams{TenantID: tenantID, ID: after})
		if err = db.Translate(err); errors.Is(err, db.ErrNotFound) || (err == nil && cur.EndpointID != endpointID) {
			return nil, false, apperr.New(apperr.InvalidRequest, "starting_after names no delivery of this endpoint")
		}
		if err != nil {
			return nil, false, err
		}
		p.HasCursor, p.AfterCreatedAt, p.AfterID = true, cur.CreatedAt, cur.ID
	}
	rows, err := db.Q.DeliveryListPage(ctx, s.pool, p)
	if err != nil {
		return nil, false, db.Translate(err)
	}
	list, more := page(rows, limit, deliveryOf)
	return list, more, nil
}

// Retry makes the tenant's delivery id, failed or pending, due now with a
// fresh schedule (its attempts count on), and wakes the deliverers: 404 for
// an unknown delivery, another tenant's or a deleted endpoint's, 409 for a
// delivered one. It is POST /v1/webhook_deliveries/{id}/retry; the console's
// Retry is the same call (RetryByOperator).
func (s *Endpoints) Retry(ctx context.Context, tenantID, id string) (Delivery, error) {
	d, _, err := s.retry(ctx, tenantID, id, retryOrigin{source: "api", reason: "retry_requested"})
	return d, err
}

// retryOrigin is who asks for a retry: the API, or an operator's console
// form (its key in formKey).
type retryOrigin struct {
	source, reason, formKey string
}

// retry is Retry on o's behalf. A console form whose key already retried
// the delivery does nothing again: it answers the delivery as it is, and
// replayed true.
func (s *Endpoints) retry(ctx context.Context, tenantID, id string, o retryOrigin) (out Delivery, replayed bool, err error) {
	err = db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		cur, err := db.Q.DeliveryGetForUpdate(ctx, tx, db.DeliveryGetForUpdateParams{TenantID: tenantID, ID: id})
		if err = db.Translate(err); errors.Is(err, db.ErrNotFound) {
			return apperr.New(apperr.WebhookDeliveryNotFound, "no webhook delivery %q", id)
		}
		if err != nil {
			return err
		}
		if o.formKey != "" {
			used, err := db.Q.DeliveryFormKeyUsed(ctx, tx, db.DeliveryFormKeyUsedParams{DeliveryID: id, FormKey: &o.formKey})
			if err != nil {
				return fmt.Errorf("retry delivery: %w", db.Translate(err))
			}
			if used {
				out, replayed = deliveryOf(cur), true
				return nil
			}
		}
		if cur.Status == StatusDelivered {
			return apperr.New(apperr.WebhookDeliveryDelivered, "webhook delivery %s was delivered already", id)
		}
		row, err := db.Q.DeliveryRetry(ctx, tx, id)
		if err != nil {
			return fmt.Errorf("retry delivery: %w", err)
		}
		ev := db.DeliveryEventInsertByFormParams{DeliveryID: id, FromStatus: cur.Status, ToStatus: row.Status, Source: o.source, Reason: o.reason}
		if o.formKey != "" {
			ev.FormKey = &o.formKey
		}
		if err := db.Q.DeliveryEventInsertByForm(ctx, tx, ev); err != nil {
			return fmt.Errorf("audit delivery: %w", err)
		}
		out = deliveryOf(row)
		return db.Q.DeliveryNotify(ctx, tx)
	})
	return out, replayed, err
}
