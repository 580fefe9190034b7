package delivery

import (
	"encoding/base64"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
)

// TestSignatureIsStandardWebhooks checks signature against the official
// library: its own Sign gives the same value, and its Verify accepts ours,
// for each secret of a rotation's two.
func TestSignatureIsStandardWebhooks(t *testing.T) {
	t.Parallel()
	current, previous := newSecret(), newSecret()
	require.True(t, strings.HasPrefix(current, "whsec_"))
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(current, "whsec_"))
	require.NoError(t, err)
	require.Len(t, raw, 32, "32 random bytes, standard padded base64")
	require.Len(t, current, len("whsec_")+44)

	body := []byte(`{"id":"evt_1","type":"payment.succeeded","created_at":"2026-01-02T03:04:05Z","data":{"id":"pay_1"}}`)
	ts := time.Now()
	keyC, err := secretKey(current)
	require.NoError(t, err)
	keyP, err := secretKey(previous)
	require.NoError(t, err)

	one := signature([][]byte{keyC}, "evt_1", ts.Unix(), body)
	lib, err := standardwebhooks.NewWebhook(current)
	require.NoError(t, err)
	want, err := lib.Sign("evt_1", ts, body)
	require.NoError(t, err)
	require.Equal(t, want, one)

	both := signature([][]byte{keyC, keyP}, "evt_1", ts.Unix(), body)
	require.Equal(t, one, strings.Split(both, " ")[0], "the current secret's first")
	h := http.Header{}
	h.Set("webhook-id", "evt_1")
	h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("webhook-signature", both)
	for _, s := range []string{current, previous} {
		wh, err := standardwebhooks.NewWebhook(s)
		require.NoError(t, err)
		require.NoError(t, wh.Verify(body, h))
	}
	stranger, err := standardwebhooks.NewWebhook(newSecret())
	require.NoError(t, err)
	require.Error(t, stranger.Verify(body, h))
	tampered := append([]byte{}, body...)
	tampered[len(tampered)-3] = 'X'
	require.Error(t, lib.Verify(tampered, h))

	_, err = secretKey("whsec_not base64!")
	require.ErrorIs(t, err, errBadSecret)
	_, err = secretKey("sk_" + strings.TrimPrefix(current, "whsec_"))
	require.ErrorIs(t, err, errBadSecret)
}

// TestCheckAddress: every kind of address that is not public is refused,
// however it is spelled; public ones pass.
func TestCheckAddress(t *testing.T) {
	t.Parallel()
	for addr, reason := range map[string]string{
		"127.0.0.1":          "loopback",
		"127.8.9.10":         "loopback",
		"::1":                "loopback",
		"::ffff:127.0.0.1":   "loopback",
		"10.1.2.3":           "private",
		"172.16.0.1":         "private",
		"172.31.255.255":     "private",
		"192.168.1.1":        "private",
		"::ffff:192.168.1.1": "private",
		"fc00::1":            "private",
		"fd12:3456::1":       "private",
		"169.254.169.254":    "link-local",
		"fe80::1":            "link-local",
		"100.64.0.1":         "shared (carrier-grade NAT)",
		"100.127.255.254":    "shared (carrier-grade NAT)",
		"0.0.0.0":            "unspecified",
		"::":                 "unspecified",
		"0.1.2.3":            "this-network",
		"224.0.0.1":          "multicast",
		"239.1.1.1":          "multicast",
		"ff02::1":            "multicast",
		"255.255.255.255":    "reserved",
		"240.0.0.1":          "reserved",
		"192.0.2.10":         "documentation",
		"198.18.0.1":         "benchmarking",
		"2001:db8::1":        "documentation",
		"64:ff9b::7f00:1":    "loopback (embedded in 64:ff9b::7f00:1)",
		"2002:a00:1::1":      "private (embedded in 2002:a00:1::1)",
		"2001::1":            "IETF protocol assignment",
		"::7f00:1":           "IPv4-compatible",
	} {
		err := checkAddress(netip.MustParseAddr(addr))
		var ae *AddressError
		require.ErrorAs(t, err, &ae, addr)
		require.Equal(t, reason, ae.Reason, addr)
		require.Contains(t, ae.Error(), "not a public one")
	}
	for _, addr := range []string{"8.8.8.8", "1.1.1.1", "93.184.216.34", "100.128.0.1", "172.32.0.1", "2606:4700:4700::1111", "64:ff9b::808:808", "::ffff:8.8.8.8"} {
		require.NoError(t, checkAddress(netip.MustParseAddr(addr)), addr)
	}
	require.Error(t, refuseNonPublic("tcp", "127.0.0.1:443", nil))
	require.Error(t, refuseNonPublic("tcp6", "[fe80::1%eth0]:443", nil))
	require.NoError(t, refuseNonPublic("tcp", "8.8.8.8:443", nil))
}

func TestParseSchedule(t *testing.T) {
	t.Parallel()
	s, err := ParseSchedule("5s,5m,30m,2h,5h,10h,10h")
	require.NoError(t, err)
	require.Equal(t, DefaultSchedule, s)
	require.Equal(t, "5s,5m,30m,2h,5h,10h,10h", FormatSchedule(s))
	s, err = ParseSchedule(" 100ms , 1m30s ")
	require.NoError(t, err)
	require.Equal(t, []time.Duration{100 * time.Millisecond, 90 * time.Second}, s)
	require.Equal(t, "100ms,1m30s", FormatSchedule(s))
	for _, bad := range []string{"", "5s,", "five", "0s", "-1s", "169h", strings.Repeat("1s,", 20) + "1s"} {
		_, err := ParseSchedule(bad)
		require.Error(t, err, "%q", bad)
	}
}

func TestValidateEndpoint(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("d", MaxDescriptionLen+1)
	nul := "a\x00b"
	for _, tc := range []struct {
		n         New
		allowHTTP bool
		err       string // "" valid
	}{
		{n: New{URL: "https://shop.example/hooks?x=1"}},
		{n: New{URL: "https://shop.example:8443/hooks", EventTypes: []string{"payment.succeeded", "refund.failed"}}},
		{n: New{URL: "http://shop.example/hooks"}, allowHTTP: true},
		{n: New{URL: "http://shop.example/hooks"}, err: "absolute https:// URL, not http://"},
		{n: New{URL: "ftp://shop.example/"}, allowHTTP: true, err: "not ftp://"},
		{n: New{URL: "/hooks"}, err: "absolute https:// URL with a host"},
		{n: New{URL: "https:///hooks"}, err: "with a host"},
		{n: New{URL: "https://shop.example/a b"}, err: "spaces"},
		{n: New{URL: "https://shop.example/#frag"}, err: "fragment"},
		{n: New{URL: "https://shop.example:99999/"}, err: "port"},
		{n: New{URL: "https://" + strings.Repeat("a", MaxURLLen) + ".example/"}, err: "at most 2048"},
		{n: New{URL: "https://shop.example/", EventTypes: []string{}}, err: "at least one event type"},
		{n: New{URL: "https://shop.example/", EventTypes: []string{"payment.exploded"}}, err: `"payment.exploded" is not an event type`},
		{n: New{URL: "https://shop.example/", EventTypes: []string{"payment.failed", "payment.failed"}}, err: "named twice"},
		{n: New{URL: "https://shop.example/", Description: &long}, err: "at most 1000"},
		{n: New{URL: "https://shop.example/", Description: &nul}, err: "NUL"},
	} {
		err := tc.n.Validate(tc.allowHTTP)
		if tc.err == "" {
			require.NoError(t, err, tc.n.URL)
			continue
		}
		require.ErrorContains(t, err, tc.err, tc.n.URL)
	}
	for _, typ := range EventTypes {
		require.True(t, KnownEventType(typ))
	}
	for ce, typ := range map[string]string{
		"PaymentSucceeded": "payment.succeeded", "PaymentFailed": "payment.failed", "PaymentAuthorized": "payment.authorized",
		"PaymentCanceled": "payment.canceled", "PaymentRefunded": "refund.succeeded", "PaymentRefundFailed": "refund.failed",
		"SomethingElse": "",
	} {
		require.Equal(t, typ, EventTypeOf(ce), ce)
	}
}
