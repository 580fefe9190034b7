package idempotency

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseKeyAccepts(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", MaxKeyLen)
	cases := map[string]string{
		"a":                   "a",
		long:                  long,
		"k-1":                 "k-1",
		"550e8400-e29b-41d4":  "550e8400-e29b-41d4",
		"!~#$%&'()*+,./:;<=>": "!~#$%&'()*+,./:;<=>", // every VCHAR is fine
		` abc	`:               "abc",                 // optional whitespace around the value
		`"abc"`:               "abc",                 // RFC 8941 sf-string means the same key
		`"k-1"`:               "k-1",
		`"a\"b"`:              `a"b`,
		`"a\\b"`:              `a\b`,
		`"\\\""`:              `\"`,
		`"` + long + `"`:      long,  // the limit is on the key, not the quoted form
		`a"b`:                 `a"b`, // a bare DQUOTE inside a plain key is visible ASCII
	}
	for in, want := range cases {
		got, err := ParseKey(in)
		require.NoError(t, err, "ParseKey(%q)", in)
		require.Equal(t, want, got, "ParseKey(%q)", in)
	}
}

func TestParseKeyQuotedEqualsPlain(t *testing.T) {
	t.Parallel()
	plain, err := ParseKey("abc")
	require.NoError(t, err)
	quoted, err := ParseKey(`"abc"`)
	require.NoError(t, err)
	require.Equal(t, plain, quoted)
}

func TestParseKeyRefuses(t *testing.T) {
	t.Parallel()
	missing := []string{"", " ", "\t"}
	for _, in := range missing {
		_, err := ParseKey(in)
		require.ErrorIs(t, err, ErrKeyMissing, "ParseKey(%q)", in)
	}
	invalid := map[string]string{
		"too long":                   strings.Repeat("k", MaxKeyLen+1),
		"too long quoted":            `"` + strings.Repeat("k", MaxKeyLen+1) + `"`,
		"inner space":                "a b",
		"inner space quoted":         `"a b"`,
		"tab":                        "a\tb",
		"newline":                    "a\nb",
		"NUL":                        "a\x00b",
		"DEL":                        "a\x7fb",
		"control":                    "a\x01b",
		"non-ASCII":                  "ключ",
		"non-ASCII byte":             "caf\xc3\xa9",
		"non-ASCII quoted":           `"café"`,
		"empty quoted":               `""`,
		"lone quote":                 `"`,
		"unterminated":               `"abc`,
		"unterminated after escape":  `"abc\"`,
		"trailing after close quote": `"abc"x`,
		"inner unescaped quote":      `"ab"c"`,
		"bad escape n":               `"a\nb"`,
		"bad escape u":               `"a\u0041"`,
		"backslash at end":           `"abc\`,
		"control quoted":             "\"a\x01b\"",
	}
	for name, in := range invalid {
		_, err := ParseKey(in)
		require.ErrorIs(t, err, ErrKeyInvalid, "%s: ParseKey(%q)", name, in)
	}
}
