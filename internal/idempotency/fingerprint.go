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
	members := 0
	if err := writeCanonical(&buf, v, &members); err != nil {
		return nil, err
	}
	// Each member of an object in the text has its ':' outside strings; a
	// decoded object holds fewer members than its text only when a name is
	// repeated, which the decoder resolves silently (the last one wins).
	if members != countMembers(body) {
		return nil, &DuplicateNameError{Name: duplicateName(body)}
	}
	return buf.Bytes(), nil
}

// DuplicateNameError is a JSON object that names a member twice. Parsers
// disagree about which value counts (the first, the last, an error), so a
// request like that cannot be taken to mean one thing.
type DuplicateNameError struct {
	Name string // the path of the repeated member, e.g. "amount" or "metadata.k"
}

func (e *DuplicateNameError) Error() string { return e.Name + " appears more than once" }

// countMembers counts the object members in a valid JSON text: the ':'
// outside strings.
func countMembers(body []byte) int {
	n, inString, escaped := 0, false, false
	for _, c := range body {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && c == ':':
			n++
		}
	}
	return n
}

// duplicateName is the path of the first repeated member name of a valid
// JSON text (only called once countMembers has seen that there is one).
func duplicateName(body []byte) string {
	type container struct {
		path  string
		names map[string]bool // nil for an array
		key   bool            // an object's next token is a member name
	}
	var stack []*container
	top := func() *container {
		if len(stack) == 0 {
			return nil
		}
		return stack[len(stack)-1]
	}
	pending := "" // the path of the member whose value comes next
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			return "a member"
		}
		if t := top(); t != nil && t.key {
			if name, ok := tok.(string); ok {
				path := name
				if t.path != "" {
					path = t.path + "." + name
				}
				if t.names[name] {
					return path
				}
				t.names[name], t.key, pending = true, false, path
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			c := &container{path: pending}
			if t := top(); t != nil && t.names == nil {
				c.path = t.path // an element of an array: the array's path
			}
			if tok == json.Delim('{') {
				c.names, c.key = map[string]bool{}, true
			}
			stack = append(stack, c)
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: in an object, a member name comes next.
		if t := top(); t != nil && t.names != nil {
			t.key = true
		}
	}
}

func writeCanonical(buf *bytes.Buffer, v any, members *int) error {
	switch x := v.(type) {
	case map[string]any:
		*members += len(x)
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
			if err := writeCanonical(buf, x[k], members); err != nil {
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
			if err := writeCanonical(buf, e, members); err != nil {
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
