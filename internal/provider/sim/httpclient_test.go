package sim

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/provider"
)

func TestSimPostChargeClassifiesFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		answer func(f *fakeProvider, w http.ResponseWriter, r *http.Request)
		want   provider.CallError
	}{
		{
			name:   "decline carries the failed charge",
			answer: func(f *fakeProvider, w http.ResponseWriter, r *http.Request) { f.answerCharge(w, r) },
			want:   provider.CallError{Op: "charge", Kind: provider.KindDeclined, Sent: true, Status: 402, Code: "card_declined"},
		},
		{
			name: "lost answer may have been sent",
			answer: func(_ *fakeProvider, w http.ResponseWriter, _ *http.Request) {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					_ = conn.Close()
				}
			},
			want: provider.CallError{Op: "charge", Kind: provider.KindTransport, Sent: true},
		},
		{
			name:   "5xx",
			answer: func(_ *fakeProvider, w http.ResponseWriter, _ *http.Request) { answerError(w, 503, "simulated_fault") },
			want:   provider.CallError{Op: "charge", Kind: provider.KindStatus, Sent: true, Status: 503, Code: "simulated_fault"},
		},
		{
			name:   "201 that is not a charge",
			answer: func(_ *fakeProvider, w http.ResponseWriter, _ *http.Request) { answerJSON(w, 201, map[string]string{}) },
			want:   provider.CallError{Op: "charge", Kind: provider.KindBadResponse, Sent: true, Status: 201},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var f *fakeProvider
			f = newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) { tt.answer(f, w, r) })

			_, err := NewHTTPClient("sim", f.url, testAPIKey, nil).PostCharge(t.Context(), declinedReq("k1"))

			var ce *provider.CallError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tt.want.Op, ce.Op)
			require.Equal(t, tt.want.Kind, ce.Kind)
			require.Equal(t, tt.want.Sent, ce.Sent)
			require.Equal(t, tt.want.Status, ce.Status)
			require.Equal(t, tt.want.Code, ce.Code)
			if tt.want.Kind == provider.KindDeclined {
				require.NotNil(t, ce.Charge)
				require.Equal(t, "ch_k1", ce.Charge.ID)
				require.Equal(t, provider.ChargeFailed, ce.Charge.Status)
			}
		})
	}
}

func TestSimConnectionRefusedIsNotSent(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()

	_, err := NewHTTPClient("sim", srv.URL, testAPIKey, nil).PostCharge(t.Context(), chargeReq("k1"))

	var ce *provider.CallError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, provider.KindTransport, ce.Kind)
	require.False(t, ce.Sent)
}

// A call error quotes the request URL; PROVIDER_URL's credentials (a
// password, or a token as the whole user info) are masked in it, since call
// errors are logged.
func TestSimCallErrorsHideURLCredentials(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, base := range []string{"http://u:s3cret@" + host, "http://s3cret@" + host, "http://u:s3cret@" + host + ":notaport"} {
		_, err := NewHTTPClient("sim", base, testAPIKey, nil).FindCharge(t.Context(), provider.Lookup{Key: "k1"})
		var ce *provider.CallError
		require.ErrorAs(t, err, &ce, base)
		require.Equal(t, provider.KindTransport, ce.Kind, base)
		require.NotContains(t, err.Error(), "s3cret", base)
	}
}
