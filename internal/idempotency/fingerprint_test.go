package idempotency

import (
	"bytes"
	"encoding/json"
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"
)

const route = "/v1/payments"

func fp(t *testing.T, method, route, body string) []byte {
	t.Helper()
	f, err := Fingerprint(method, route, []byte(body))
	require.NoError(t, err, "Fingerprint(%s)", body)
	require.Len(t, f, 32)
	return f
}

func TestFingerprintSameRequest(t *testing.T) {
	t.Parallel()
	base := `{"order_id":"o-1","amount":500,"currency":"USD","payment_method":"pm_card_visa"}`
	same := map[string]string{
		"key order":      `{"payment_method":"pm_card_visa","currency":"USD","amount":500,"order_id":"o-1"}`,
		"whitespace":     "{ \"order_id\" : \"o-1\" ,\n\t\"amount\": 500, \"currency\":\"USD\",\r\n \"payment_method\":\"pm_card_visa\" }\n",
		"500.0":          `{"order_id":"o-1","amount":500.0,"currency":"USD","payment_method":"pm_card_visa"}`,
		"5e2":            `{"order_id":"o-1","amount":5e2,"currency":"USD","payment_method":"pm_card_visa"}`,
		"5E+2":           `{"order_id":"o-1","amount":5E+2,"currency":"USD","payment_method":"pm_card_visa"}`,
		"50000e-2":       `{"order_id":"o-1","amount":50000e-2,"currency":"USD","payment_method":"pm_card_visa"}`,
		"string escapes": `{"order_id":"\u006f-1","amount":500,"currency":"USD","payment_method":"pm_card_visa"}`,
	}
	want := fp(t, "POST", route, base)
	for name, body := range same {
		require.Equal(t, want, fp(t, "POST", route, body), name)
	}
}

func TestFingerprintNested(t *testing.T) {
	t.Parallel()
	a := `{"metadata":{"b":{"y":[1,{"q":2,"p":1}],"x":null},"a":true},"amount":1}`
	b := ` { "amount" : 1.0 , "metadata" : { "a" : true , "b" : { "x" : null , "y" : [ 1e0 , { "p" : 1 , "q" : 2 } ] } } } `
	require.Equal(t, fp(t, "POST", route, a), fp(t, "POST", route, b))

	canon, err := Canonical([]byte(b))
	require.NoError(t, err)
	require.Equal(t, `{"amount":1,"metadata":{"a":true,"b":{"x":null,"y":[1,{"p":1,"q":2}]}}}`, string(canon))

	// Array order is meaningful; object key order is not.
	require.NotEqual(t, fp(t, "POST", route, `{"a":[1,2]}`), fp(t, "POST", route, `{"a":[2,1]}`))
	require.NotEqual(t, fp(t, "POST", route, `{"a":{"b":{"c":1}}}`), fp(t, "POST", route, `{"a":{"b":{"c":2}}}`))
	require.NotEqual(t, fp(t, "POST", route, `{"a":{"b":{"c":1}}}`), fp(t, "POST", route, `{"a":{"b":{"d":1}}}`))
}

func TestFingerprintDifferentRequest(t *testing.T) {
	t.Parallel()
	base := `{"order_id":"o-1","amount":500,"currency":"USD","payment_method":"pm_card_visa"}`
	want := fp(t, "POST", route, base)
	different := map[string]string{
		"amount":             `{"order_id":"o-1","amount":501,"currency":"USD","payment_method":"pm_card_visa"}`,
		"amount fraction":    `{"order_id":"o-1","amount":500.5,"currency":"USD","payment_method":"pm_card_visa"}`,
		"amount as string":   `{"order_id":"o-1","amount":"500","currency":"USD","payment_method":"pm_card_visa"}`,
		"order":              `{"order_id":"o-2","amount":500,"currency":"USD","payment_method":"pm_card_visa"}`,
		"currency":           `{"order_id":"o-1","amount":500,"currency":"EUR","payment_method":"pm_card_visa"}`,
		"payment method":     `{"order_id":"o-1","amount":500,"currency":"USD","payment_method":"pm_card_declined"}`,
		"extra field":        `{"order_id":"o-1","amount":500,"currency":"USD","payment_method":"pm_card_visa","description":"x"}`,
		"missing field":      `{"order_id":"o-1","amount":500,"currency":"USD"}`,
		"null vs absent":     `{"order_id":"o-1","amount":500,"currency":"USD","payment_method":"pm_card_visa","description":null}`,
		"string case":        `{"order_id":"O-1","amount":500,"currency":"USD","payment_method":"pm_card_visa"}`,
		"key renamed":        `{"orderId":"o-1","amount":500,"currency":"USD","payment_method":"pm_card_visa"}`,
		"value type (bool)":  `{"order_id":"o-1","amount":true,"currency":"USD","payment_method":"pm_card_visa"}`,
		"value type (array)": `{"order_id":["o-1"],"amount":500,"currency":"USD","payment_method":"pm_card_visa"}`,
	}
	for name, body := range different {
		require.NotEqual(t, want, fp(t, "POST", route, body), name)
	}
	// Numbers are compared exactly, not as float64.
	require.NotEqual(t,
		fp(t, "POST", route, `{"amount":12345678901234567890}`),
		fp(t, "POST", route, `{"amount":12345678901234567891}`))
	// Method and route are part of the request.
	require.NotEqual(t, want, fp(t, "PUT", route, base))
	require.NotEqual(t, want, fp(t, "POST", "/v1/refunds", base))
	// The separator keeps method and route apart.
	require.NotEqual(t, fp(t, "POST", "/a", `{}`), fp(t, "POS", "T/a", `{}`))
}

func TestFingerprintRefusesInvalidJSON(t *testing.T) {
	t.Parallel()
	for _, body := range []string{"", " ", "{", `{"a":}`, `{"a":1} {"b":2}`, `{"a":1}x`, `{"a":1}}`, `{"a":1}]`, `[1]]`, "nope"} {
		_, err := Fingerprint("POST", route, []byte(body))
		require.Error(t, err, "Fingerprint(%q)", body)
	}
}

// The fast paths of Canonical (strings json escapes nothing of, plain
// integers) must give byte for byte what the general ones give, or a stored
// key's fingerprint would no longer match its own retry.
func TestCanonicalFastPathsAgree(t *testing.T) {
	t.Parallel()
	strs := []string{"", "o-1", "pm_card_visa", "a b", "~", " ", "<", ">", "&", `"`, `\`, "\x00", "\x1f", "\x7f",
		"é", "\u2028", "\u2029", "\xff", "tab\there", "order <1> & \"2\""}
	for c := 0; c < 256; c++ {
		strs = append(strs, "x"+string(rune(c))+"y", string([]byte{byte(c)}))
	}
	for _, s := range strs {
		var got bytes.Buffer
		writeString(&got, s)
		want, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(want), got.String(), "string %q", s)
	}
	nums := map[string]bool{
		"0": true, "1": true, "-1": true, "500": true, "99999999999": true, "123456789012345678901234567890": true,
		"-0": false, "00": false, "01": false, "+1": false, "1.0": false, "1e2": false, "-": false, "": false, "1a": false,
	}
	for n, plain := range nums {
		require.Equal(t, plain, plainInteger(n), "plainInteger(%q)", n)
		if !plain {
			continue
		}
		r, ok := new(big.Rat).SetString(n)
		require.True(t, ok, n)
		require.Equal(t, r.RatString(), n, "canonical form of %q", n)
	}
}

func FuzzWriteString(f *testing.F) {
	f.Add("o-1")
	f.Add("<&>")
	f.Fuzz(func(t *testing.T, s string) {
		var got bytes.Buffer
		writeString(&got, s)
		want, _ := json.Marshal(s)
		if got.String() != string(want) {
			t.Fatalf("writeString(%q) = %s, json.Marshal = %s", s, got.String(), want)
		}
	})
}

// A repeated member name is refused, naming it: which of its values counts
// is up to the parser, so such a body cannot be the same request as any
// other.
func TestCanonicalRefusesRepeatedNames(t *testing.T) {
	t.Parallel()
	for body, name := range map[string]string{
		`{"amount":1,"amount":100000}`:                      "amount",
		`{"amount":1,"am\u006funt":2}`:                      "amount",
		`{"metadata":{"k":"a","k":"b"},"amount":1}`:         "metadata.k",
		`{"a":{"x":1},"b":[{"y":1},{"z":1,"z":2}]}`:         "b.z",
		`{"a":[[{"q":1}],{"r":{"s":1,"s":1}}],"t":"x:y\\"}`: "a.r.s",
	} {
		_, err := Canonical([]byte(body))
		var dup *DuplicateNameError
		require.ErrorAs(t, err, &dup, body)
		require.Equal(t, name, dup.Name, body)
	}
	// Colons and quotes inside strings, equal names in different objects,
	// and escaped quotes are not repetitions.
	for _, body := range []string{
		`{"a":"x:y","b":"\":\"","c":{"a":1},"d":[{"a":1},{"a":2}]}`,
		`{"k\"":1,"k":2,"t":"\\"}`,
		`[{"a":1},{"a":1}]`,
		`"a:b"`,
	} {
		_, err := Canonical([]byte(body))
		require.NoError(t, err, body)
	}
}
