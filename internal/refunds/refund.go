package refunds

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/ids"
	"github.com/acme/paymentsvc/internal/lifecycle"
)

// Refund is one refund of a payment, as stored.
type Refund struct {
	ID               string
	TenantID         string
	PaymentID        string
	IdempotencyKey   string
	Amount           int64
	Currency         string
	Reason           *string
	Metadata         map[string]string
	Status           lifecycle.Status
	Provider         string
	ProviderRefundID *string
	FailureCode      *string
	CheckCount       int
	NeedsReview      bool
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// View is the refund as clients and event consumers see it.
type View struct {
	ID               string            `json:"id"`
	TenantID         string            `json:"tenant_id,omitempty"`
	PaymentID        string            `json:"payment_id"`
	Amount           int64             `json:"amount"`
	Currency         string            `json:"currency"`
	Status           lifecycle.Status  `json:"status"`
	Provider         string            `json:"provider"`
	ProviderRefundID *string           `json:"provider_refund_id"`
	FailureCode      *string           `json:"failure_code"`
	Reason           *string           `json:"reason"`
	Metadata         map[string]string `json:"metadata"`
	CreatedAt        time.Time         `json:"created_at"`
	UpdatedAt        time.Time         `json:"updated_at"`
}

// Public is the API view of the refund (without tenant_id).
func (r Refund) Public() View {
	meta := r.Metadata
	if meta == nil {
		meta = map[string]string{}
	}
	return View{
		ID: r.ID, PaymentID: r.PaymentID, Amount: r.Amount, Currency: r.Currency, Status: r.Status,
		Provider: r.Provider, ProviderRefundID: r.ProviderRefundID, FailureCode: r.FailureCode,
		Reason: r.Reason, Metadata: meta,
		CreatedAt: r.CreatedAt.UTC().Truncate(time.Second), UpdatedAt: r.UpdatedAt.UTC().Truncate(time.Second),
	}
}

// The reasons a refund may give.
var Reasons = []string{"duplicate", "fraudulent", "requested_by_customer", "other"}

// NewID returns a fresh refund id.
func NewID() string { return ids.New("rfd_", 12) }

// ProviderKey is the idempotency key sent to the provider for refund id.
func ProviderKey(refundID string) string { return "psvc_" + refundID }

// IDOfProviderKey is the refund id a ProviderKey names ("" when key is not
// one of ours).
func IDOfProviderKey(key string) string {
	id, ok := strings.CutPrefix(key, "psvc_rfd_")
	if !ok || id == "" {
		return ""
	}
	return "rfd_" + id
}

// fromRow converts a database row; generated types stop here.
func fromRow(r db.Refund) Refund {
	out := Refund{
		ID: r.ID, TenantID: r.TenantID, PaymentID: r.PaymentID, IdempotencyKey: r.IdempotencyKey,
		Amount: r.Amount, Currency: r.Currency, Reason: r.Reason, Status: lifecycle.Status(r.Status),
		Provider: r.Provider, ProviderRefundID: r.ProviderRefundID, FailureCode: r.FailureCode,
		CheckCount: int(r.CheckCount), NeedsReview: r.NeedsReview, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if len(r.Metadata) > 0 {
		_ = json.Unmarshal(r.Metadata, &out.Metadata)
	}
	return out
}

// orphanKeyPrefix starts the idempotency key of settlement's refund of an
// orphan charge (a charge no payment of ours stands for).
const orphanKeyPrefix = "refund_"

// OrphanKey is the idempotency key of the refund of orphan charge chargeID:
// derived from the charge, so settling a day again never refunds it twice.
func OrphanKey(chargeID string) string { return orphanKeyPrefix + chargeID }

// IsOrphanKeyOf reports whether key is OrphanKey(chargeID): the key of
// settlement's refund of that very charge. A key that only starts like one
// ("refund_…" is a common name for a key made outside this service) is not.
func IsOrphanKeyOf(key, chargeID string) bool { return key == OrphanKey(chargeID) }
