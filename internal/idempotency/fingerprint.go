package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"sort"
	"strconv"
	"strings"
)

// Fingerprint identifies "the same request": method, route and the
// canonical form of the JSON body, so that a reordered or re-spaced but
// equal body is the same request.
func Fingerprint(method, route string, body []byte) ([]byte, error) {
	canon, err := Canonical(body)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", method, route)
	h.Write(canon)
	return h.Sum(nil), nil
}

// Canonical re-encodes a JSON document with object keys sorted, no
// insignificant whitespace, and numbers in one form per value (500, 500.0
// and 5e2 are equal).
func Canonical(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	// Not dec.More(): it reports false for a trailing '}' or ']'.
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeCanonical(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k)
			buf.WriteByte(':')
			if err := writeCanonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case json.Number:
		if plainInteger(string(x)) {
			buf.WriteString(string(x)) // what RatString would print, without big.Rat
			break
		}
		r, ok := new(big.Rat).SetString(string(x))
		if !ok {
			return fmt.Errorf("invalid number %q", x)
		}
		buf.WriteString(r.RatString())
	case string:
		writeString(buf, x)
	case bool:
		buf.WriteString(strconv.FormatBool(x))
	case nil:
		buf.WriteString("null")
	default:
		return fmt.Errorf("unexpected JSON value %T", v)
	}
	return nil
}

// writeString writes s as encoding/json does. A string of printable ASCII
// that json escapes nothing of (no '"', '\\', '<', '>', '&') is written as
// is between quotes, which is byte for byte what json.Marshal gives.
func writeString(buf *bytes.Buffer, s string) {
	if !needsEscape(s) {
		buf.WriteByte('"')
		buf.WriteString(s)
		buf.WriteByte('"')
		return
	}
	b, _ := json.Marshal(s) // strings always marshal
	buf.Write(b)
}

func needsEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return true
		}
	}
	return false
}

// plainInteger reports whether n is 0 or a nonzero integer without leading
// zeros, sign '+', fraction or exponent: the numbers whose canonical form
// (big.Rat's RatString) is the literal itself.
func plainInteger(n string) bool {
	digits := strings.TrimPrefix(n, "-")
	if digits == "0" {
		return n == "0" // "-0" is 0
	}
	if digits == "" || digits[0] == '0' {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return true
}
