package payments

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/captures"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/provider"
	simclient "github.com/acme/paymentsvc/internal/provider/sim"
	"github.com/acme/paymentsvc/internal/provider/stripe"
	"github.com/acme/paymentsvc/internal/refunds"
)

// A step that may have been sent is never POSTed again past its provider's
// key window (Stripe: 23 h after its creation); a provider without a window
// (the simulator) and a step never sent (CREATED) are not concerned.
func TestPastKeyWindow(t *testing.T) {
	t.Parallel()
	cfg := provider.Config{}
	st := provider.NewResilient(stripe.New("stripe", "http://127.0.0.1:9", "sk", nil), cfg, nil)
	sm := provider.NewResilient(simclient.NewHTTPClient("sim", "http://127.0.0.1:9", "sk", nil), cfg, nil)
	require.Equal(t, 23*time.Hour, st.KeyWindow())
	require.Zero(t, sm.KeyWindow())

	old, young := time.Now().Add(-23*time.Hour-time.Minute), time.Now().Add(-22*time.Hour)
	for _, tt := range []struct {
		name   string
		p      Provider
		status lifecycle.Status
		rec    any
		want   bool
	}{
		{"unknown payment past the window", st, lifecycle.Unknown, attempts.Attempt{CreatedAt: old}, true},
		{"pending refund past the window", st, lifecycle.Pending, refunds.Refund{CreatedAt: old}, true},
		{"unknown capture past the window", st, lifecycle.Unknown, captures.Capture{CreatedAt: old}, true},
		{"within the window", st, lifecycle.Unknown, attempts.Attempt{CreatedAt: young}, false},
		{"never sent", st, lifecycle.Created, attempts.Attempt{CreatedAt: old}, false},
		{"provider without a window", sm, lifecycle.Unknown, attempts.Attempt{CreatedAt: old}, false},
	} {
		require.Equal(t, tt.want, pastKeyWindow(tt.p, subject{status: tt.status, rec: tt.rec}), tt.name)
	}
}
