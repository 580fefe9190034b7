package webhook

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/providersim"
)

func TestParseSignatureHeader(t *testing.T) {
	t.Parallel()
	sigA := strings.Repeat("ab", 32)
	sigB := strings.Repeat("01", 32)
	valid := []struct {
		name   string
		header string
		ts     int64
		sigs   []string
	}{
		{"one v1", "t=1760000000,v1=" + sigA, 1760000000, []string{sigA}},
		{"two v1", "t=5,v1=" + sigA + ",v1=" + sigB, 5, []string{sigA, sigB}},
		{"t last", "v1=" + sigA + ",t=7", 7, []string{sigA}},
		{"unknown schemes ignored", "t=7,v0=zz,v1=" + sigA + ",v2=whatever", 7, []string{sigA}},
		{"spaces around items", " t=7 ,\tv1=" + sigA + " ", 7, []string{sigA}},
		{"upper-case hex", "t=7,v1=" + strings.ToUpper(sigA), 7, []string{sigA}},
		{"t zero", "t=0,v1=" + sigA, 0, []string{sigA}},
	}
	for _, tc := range valid {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts, sigs, err := ParseSignatureHeader(tc.header)
			require.NoError(t, err, "parse")
			require.Equal(t, tc.ts, ts, "t")
			require.Equal(t, len(tc.sigs), len(sigs), "number of v1")
			for i, s := range sigs {
				require.Equal(t, tc.sigs[i], hex.EncodeToString(s), "v1 #%d", i)
			}
		})
	}
	malformed := []struct{ name, header string }{
		{"no t", "v1=" + sigA},
		{"no v1", "t=7"},
		{"only other schemes", "t=7,v0=" + sigA},
		{"t twice", "t=7,t=8,v1=" + sigA},
		{"t empty", "t=,v1=" + sigA},
		{"t negative", "t=-7,v1=" + sigA},
		{"t with sign", "t=+7,v1=" + sigA},
		{"t not a number", "t=abc,v1=" + sigA},
		{"t fractional", "t=7.5,v1=" + sigA},
		{"t overflows", "t=99999999999999999999,v1=" + sigA},
		{"v1 not hex", "t=7,v1=" + strings.Repeat("zz", 32)},
		{"v1 odd length", "t=7,v1=" + sigA[:63]},
		{"v1 too short", "t=7,v1=" + sigA[:62]},
		{"v1 too long", "t=7,v1=" + sigA + "00"},
		{"v1 empty", "t=7,v1="},
		{"item without =", "t=7,v1=" + sigA + ",junk"},
		{"empty key", "t=7,=x,v1=" + sigA},
		{"empty item", "t=7,,v1=" + sigA},
		{"trailing comma", "t=7,v1=" + sigA + ","},
		{"semicolons", "t=7;v1=" + sigA},
		{"space inside value", "t=7,v1= " + sigA},
		{"unicode space is not whitespace", "\u2000t=7,v1=" + sigA},
	}
	for _, tc := range malformed {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := ParseSignatureHeader(tc.header)
			require.ErrorIs(t, err, ErrMalformedSignature, "ParseSignatureHeader(%q)", tc.header)
		})
	}
	for _, h := range []string{"", "  "} {
		_, _, err := ParseSignatureHeader(h)
		require.ErrorIs(t, err, ErrMissingSignature, "ParseSignatureHeader(%q)", h)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"evt_1","type":"charge.succeeded"}`)
	now := testNow.Add(999 * time.Millisecond) // sub-second part must not matter
	ts := testNow.Unix()
	other := "whsec_other"
	cases := []struct {
		name    string
		header  string
		secrets []string
		want    error
	}{
		{"valid", sign(testSecret, ts, body), []string{testSecret}, nil},
		{"wrong secret", sign(other, ts, body), []string{testSecret}, ErrSignatureMismatch},
		{"rotated: signed with the second secret", sign(other, ts, body), []string{testSecret, other}, nil},
		{"two v1, second valid", sign(other, ts, body) + ",v1=" + hex.EncodeToString(mac(testSecret, ts, body)), []string{testSecret}, nil},
		{"two v1, none valid", sign(other, ts, body) + ",v1=" + hex.EncodeToString(mac("x", ts, body)), []string{testSecret}, ErrSignatureMismatch},
		{"signature of another timestamp", "t=" + strconv.FormatInt(ts+1, 10) + ",v1=" + hex.EncodeToString(mac(testSecret, ts, body)), []string{testSecret}, ErrSignatureMismatch},
		{"300s in the past", sign(testSecret, ts-300, body), []string{testSecret}, nil},
		{"300s ahead", sign(testSecret, ts+300, body), []string{testSecret}, nil},
		{"301s in the past", sign(testSecret, ts-301, body), []string{testSecret}, ErrStaleSignature},
		{"301s ahead", sign(testSecret, ts+301, body), []string{testSecret}, ErrStaleSignature},
		{"stale and wrong reports the mismatch", sign(other, ts-3600, body), []string{testSecret}, ErrSignatureMismatch},
		{"empty secret never verifies", sign("", ts, body), []string{""}, ErrSignatureMismatch},
		{"no secrets", sign(testSecret, ts, body), nil, ErrSignatureMismatch},
		{"missing", "", []string{testSecret}, ErrMissingSignature},
		{"malformed", "v1=abc", []string{testSecret}, ErrMalformedSignature},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := Verify(tc.header, body, tc.secrets, now, Tolerance)
			if tc.want == nil {
				require.NoError(t, err, "Verify")
				return
			}
			require.ErrorIs(t, err, tc.want)
		})
	}
	t.Run("tampered body", func(t *testing.T) {
		t.Parallel()
		h := sign(testSecret, ts, body)
		tampered := bytes.Replace(body, []byte("evt_1"), []byte("evt_2"), 1)
		require.ErrorIs(t, Verify(h, tampered, []string{testSecret}, now, Tolerance), ErrSignatureMismatch)
	})
}

// FuzzParseSignatureHeader checks that parsing never panics, that what it
// accepts is well formed, and that a header rebuilt from it parses the same.
// The seed corpus is in testdata/fuzz/FuzzParseSignatureHeader.
func FuzzParseSignatureHeader(f *testing.F) {
	f.Add("t=1760000000,v1=" + strings.Repeat("ab", 32))
	f.Fuzz(func(t *testing.T, h string) {
		ts, sigs, err := ParseSignatureHeader(h)
		if err != nil {
			require.True(t, errors.Is(err, ErrMalformedSignature) || errors.Is(err, ErrMissingSignature),
				"error %v is neither malformed nor missing", err)
			return
		}
		require.GreaterOrEqual(t, ts, int64(0), "accepted t=%d", ts)
		require.NotEmpty(t, sigs, "accepted no signature")
		rebuilt := "t=" + strconv.FormatInt(ts, 10)
		for _, s := range sigs {
			require.Len(t, s, signatureLen, "accepted signature")
			rebuilt += ",v1=" + hex.EncodeToString(s)
		}
		ts2, sigs2, err := ParseSignatureHeader(rebuilt)
		require.NoError(t, err, "parse rebuilt header")
		require.Equal(t, ts, ts2, "t after rebuild")
		require.Equal(t, len(sigs), len(sigs2), "signatures after rebuild")
		require.Equal(t, sigs, sigs2, "signatures after rebuild")
	})
}

// TestSimulatorConformance checks our reading of the provider's signature
// and event format against the simulator's own signing and event encoding.
func TestSimulatorConformance(t *testing.T) {
	t.Parallel()
	ev := providersim.Event{ID: "evt_sim", Type: providersim.EventChargeFailed, Created: testNow.Unix()}
	ev.Data.Charge = providersim.Charge{
		ID: "ch_sim", Amount: 500, Currency: "USD", Status: providersim.StatusFailed,
		Reference: "pay_x", IdempotencyKey: "psvc_pay_x", FailureCode: "card_declined",
	}
	body, err := json.Marshal(ev)
	require.NoError(t, err, "encode")
	header := providersim.SignatureHeader(testSecret, testNow.Unix(), body)
	require.NoError(t, Verify(header, body, []string{"whsec_old", testSecret}, testNow, Tolerance), "Verify")
	got, err := parseEvent(body)
	require.NoError(t, err, "parseEvent")
	require.Equal(t, provider.Charge{
		ID: "ch_sim", Amount: 500, Currency: "USD", Status: "failed",
		Reference: "pay_x", IdempotencyKey: "psvc_pay_x", FailureCode: "card_declined",
	}, *got.Data.Charge,

		"charge")
}
