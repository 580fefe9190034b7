package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/redact"
)

// The operator console's reads and its Retry (internal/console).

// MaxOfPayment bounds the deliveries OfPayment returns.
const MaxOfPayment = 500

// FailingWindow is how far back CountFailing counts failed deliveries.
const FailingWindow = 24 * time.Hour

// PaymentDelivery is one delivery of a payment's event, with its endpoint's
// URL (credentials in it masked: a merchant may put a token there).
type PaymentDelivery struct {
	Delivery
	EndpointURL     string
	EndpointDeleted bool
}

// OfPayment returns the deliveries of payment paymentID's events to every
// endpoint (deleted ones included), oldest first, at most MaxOfPayment.
func OfPayment(ctx context.Context, q db.DBTX, paymentID string) ([]PaymentDelivery, error) {
	rows, err := db.Q.DeliveryListByPayment(ctx, q, db.DeliveryListByPaymentParams{PaymentID: paymentID, MaxRows: MaxOfPayment})
	if err != nil {
		return nil, db.Translate(err)
	}
	out := make([]PaymentDelivery, len(rows))
	for i, r := range rows {
		out[i] = PaymentDelivery{Delivery: deliveryOf(r.WebhookDelivery), EndpointURL: redact.URL(r.EndpointUrl), EndpointDeleted: r.EndpointDeleted}
	}
	return out, nil
}

// CountFailing counts the deliveries that are failing: pending after at
// least one attempt without a 2xx, and failed within FailingWindow.
func CountFailing(ctx context.Context, q db.DBTX) (int64, error) {
	n, err := db.Q.DeliveryCountFailing(ctx, q, FailingWindow.Milliseconds())
	return n, db.Translate(err)
}

// RetryByOperator is Retry (the deliveries API's manual retry) of delivery
// id, whatever its tenant, asked by the operator with email from a console
// form whose key is formKey: audited with source console and the operator
// in the reason. The form sent again retries nothing more and answers
// replayed true. Errors are Retry's (404, 409).
// A delivery that is not of payment paymentID is not found.
func (s *Endpoints) RetryByOperator(ctx context.Context, paymentID, id, email, formKey string) (d Delivery, replayed bool, err error) {
	owner, err := db.Q.DeliveryOwnerOf(ctx, s.pool, id)
	if err = db.Translate(err); errors.Is(err, db.ErrNotFound) || (err == nil && owner.PaymentID != paymentID) {
		return Delivery{}, false, apperr.New(apperr.WebhookDeliveryNotFound, "no webhook delivery %q of payment %s", id, paymentID)
	} else if err != nil {
		return Delivery{}, false, err
	}
	return s.retry(ctx, owner.TenantID, id, retryOrigin{
		source: string(lifecycle.SourceConsole), reason: lifecycle.ByOperator("retry_requested", email), formKey: formKey,
	})
}

// TimelineOfPayment returns the audit rows of the changes to payment
// paymentID's deliveries that someone asked for (manual retries from the
// API or the console, an endpoint's deletion), oldest first; the attempts
// themselves are counted on each delivery instead.
func TimelineOfPayment(ctx context.Context, q db.DBTX, paymentID string) ([]lifecycle.Audit, error) {
	rows, err := db.Q.DeliveryEventListByPayment(ctx, q, paymentID)
	if err != nil {
		return nil, db.Translate(err)
	}
	out := make([]lifecycle.Audit, len(rows))
	for i, r := range rows {
		out[i] = lifecycle.Audit{
			SubjectID: r.DeliveryID, From: lifecycle.Status(r.FromStatus), To: lifecycle.Status(r.ToStatus),
			Source: lifecycle.Source(r.Source), Reason: r.Reason, At: r.CreatedAt,
		}
	}
	return out, nil
}
