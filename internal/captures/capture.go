package captures

import (
	"strings"
	"time"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/ids"
	"github.com/acme/paymentsvc/internal/lifecycle"
)

// Kind is a capture or a void.
type Kind string

// The kinds.
const (
	KindCapture Kind = "capture"
	KindVoid    Kind = "void"
)

// idPrefix is the prefix of a kind's ids.
func (k Kind) idPrefix() string {
	if k == KindVoid {
		return "void_"
	}
	return "cap_"
}

// NewID returns a fresh id of kind k (cap_…, void_…).
func (k Kind) NewID() string { return ids.New(k.idPrefix(), 12) }

// Capture is one capture or void of a payment, as stored.
type Capture struct {
	ID             string
	Kind           Kind
	TenantID       string
	PaymentID      string
	IdempotencyKey string
	Amount         int64 // a capture's; 0 for a void
	Currency       string
	Reason         *string // a void's, when given
	Status         lifecycle.Status
	Provider       string
	FailureCode    *string
	CheckCount     int
	NeedsReview    bool
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// CaptureView is a capture as clients see it.
type CaptureView struct {
	ID          string           `json:"id"`
	PaymentID   string           `json:"payment_id"`
	Amount      int64            `json:"amount"`
	Currency    string           `json:"currency"`
	Status      lifecycle.Status `json:"status"`
	Provider    string           `json:"provider"`
	FailureCode *string          `json:"failure_code"`
	CreatedAt   time.Time        `json:"created_at"`
	UpdatedAt   time.Time        `json:"updated_at"`
}

// VoidView is a void as clients see it.
type VoidView struct {
	ID          string           `json:"id"`
	PaymentID   string           `json:"payment_id"`
	Status      lifecycle.Status `json:"status"`
	Reason      *string          `json:"reason"`
	Provider    string           `json:"provider"`
	FailureCode *string          `json:"failure_code"`
	CreatedAt   time.Time        `json:"created_at"`
	UpdatedAt   time.Time        `json:"updated_at"`
}

// Public is the capture (a CaptureView) or void (a VoidView) as clients see it.
func (c Capture) Public() any {
	created, updated := c.CreatedAt.UTC().Truncate(time.Second), c.UpdatedAt.UTC().Truncate(time.Second)
	if c.Kind == KindVoid {
		return VoidView{
			ID: c.ID, PaymentID: c.PaymentID, Status: c.Status, Reason: c.Reason, Provider: c.Provider,
			FailureCode: c.FailureCode, CreatedAt: created, UpdatedAt: updated,
		}
	}
	return CaptureView{
		ID: c.ID, PaymentID: c.PaymentID, Amount: c.Amount, Currency: c.Currency, Status: c.Status,
		Provider: c.Provider, FailureCode: c.FailureCode, CreatedAt: created, UpdatedAt: updated,
	}
}

// VoidReasons are the reasons a void may give.
var VoidReasons = []string{"duplicate", "fraudulent", "requested_by_customer", "abandoned"}

// ProviderKey is the idempotency key sent to the provider for capture or
// void id.
func ProviderKey(id string) string { return "psvc_" + id }

// IDOfProviderKey is the capture or void id a ProviderKey names ("" when
// key is not one of ours, or not of kind k).
func IDOfProviderKey(k Kind, key string) string {
	id, ok := strings.CutPrefix(key, "psvc_")
	if !ok || !strings.HasPrefix(id, k.idPrefix()) || id == k.idPrefix() {
		return ""
	}
	return id
}

// fromRow converts a database row; generated types stop here.
func fromRow(r db.Capture) Capture {
	c := Capture{
		ID: r.ID, Kind: Kind(r.Kind), TenantID: r.TenantID, PaymentID: r.PaymentID, IdempotencyKey: r.IdempotencyKey,
		Currency: r.Currency, Reason: r.Reason, Status: lifecycle.Status(r.Status), Provider: r.Provider,
		FailureCode: r.FailureCode, CheckCount: int(r.CheckCount), NeedsReview: r.NeedsReview,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if r.Amount != nil {
		c.Amount = *r.Amount
	}
	return c
}

// OrphanVoidKey is the idempotency key of settlement's void of orphan
// authorization chargeID (an authorized charge no payment of ours stands
// for): derived from the charge, so settling a day again voids nothing twice.
func OrphanVoidKey(chargeID string) string { return "void_" + chargeID }
