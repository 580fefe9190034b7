package idempotency

import (
	"errors"
	"strings"
)

// Key parsing errors.
var (
	ErrKeyMissing = errors.New("Idempotency-Key header is required")
	ErrKeyInvalid = errors.New("Idempotency-Key must be 1-255 visible ASCII characters")
)

// MaxKeyLen is the longest key accepted.
const MaxKeyLen = 255

// ParseKey validates an Idempotency-Key header value. The RFC 8941
// sf-string form ("…", with \" and \\ escapes) means the same key as its
// content, so `"abc"` and `abc` are one key.
func ParseKey(header string) (string, error) {
	v := strings.Trim(header, " \t")
	if v == "" {
		return "", ErrKeyMissing
	}
	if v[0] == '"' {
		k, ok := unquote(v)
		if !ok {
			return "", ErrKeyInvalid
		}
		v = k
	}
	if len(v) == 0 || len(v) > MaxKeyLen {
		return "", ErrKeyInvalid
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e { // VCHAR
			return "", ErrKeyInvalid
		}
	}
	return v, nil
}

// unquote decodes an RFC 8941 sf-string.
func unquote(v string) (string, bool) {
	if len(v) < 2 || v[len(v)-1] != '"' {
		return "", false
	}
	var b strings.Builder
	inner := v[1 : len(v)-1]
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		switch {
		case c == '\\':
			i++
			if i == len(inner) || (inner[i] != '"' && inner[i] != '\\') {
				return "", false
			}
			b.WriteByte(inner[i])
		case c == '"':
			return "", false
		case c < 0x20 || c > 0x7e:
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}
