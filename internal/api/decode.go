package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/captures"
	"github.com/acme/paymentsvc/internal/httpbody"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/refunds"
)

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 64 << 10

// MaxAmount is the largest amount accepted, in minor units.
const MaxAmount = 99999999999

// readJSONBody checks the content type and size and returns the raw body.
func readJSONBody(r *http.Request) ([]byte, error) {
	return readBody(r, false)
}

// emptyObject is the body a request without one stands for, where every
// field is optional.
var emptyObject = []byte("{}")

// readOptionalJSONBody is readJSONBody for a request whose fields are all
// optional: no body at all (Content-Length 0, any or no Content-Type) is
// the empty object, with the empty object's fingerprint.
func readOptionalJSONBody(r *http.Request) ([]byte, error) {
	return readBody(r, true)
}

func readBody(r *http.Request, optional bool) ([]byte, error) {
	if optional && r.ContentLength == 0 {
		return emptyObject, nil
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return nil, apperr.New(apperr.UnsupportedMediaType, "Content-Type must be application/json")
	}
	body, err := httpbody.Read(r, MaxBodyBytes)
	if err != nil {
		if errors.Is(err, httpbody.ErrTooLarge) {
			return nil, apperr.New(apperr.PayloadTooLarge, "request body is larger than %d bytes", MaxBodyBytes)
		}
		return nil, apperr.New(apperr.InvalidRequest, "could not read request body")
	}
	if optional && len(body) == 0 {
		return emptyObject, nil // sent chunked, but empty all the same
	}
	return body, nil
}

// createRequest is the body of POST /v1/payments.
type createRequest struct {
	OrderID       *string           `json:"order_id"`
	Amount        json.RawMessage   `json:"amount"` // raw: json.Number would also take the string "500"
	Currency      *string           `json:"currency"`
	PaymentMethod *string           `json:"payment_method"`
	Description   *string           `json:"description"`
	Metadata      map[string]string `json:"metadata"`
	CaptureMethod *string           `json:"capture_method"`
}

var paymentMethodRE = regexp.MustCompile(`^[A-Za-z0-9_\-.:]{1,255}$`)

func invalid(format string, args ...any) error {
	return apperr.New(apperr.InvalidRequest, format, args...)
}

// decodeCreate parses and validates a create body into the payment fields
// of a CreateInput; the detail of an error names the offending field.
func decodeCreate(body []byte) (payments.CreateInput, error) {
	var req createRequest
	if err := decodeStrict(body, &req); err != nil {
		return payments.CreateInput{}, err
	}
	var v payments.CreateInput
	switch {
	case req.OrderID == nil:
		return v, invalid("order_id is required")
	case utf8.RuneCountInString(*req.OrderID) < 1 || utf8.RuneCountInString(*req.OrderID) > 64:
		return v, invalid("order_id must be 1 to 64 characters")
	case strings.IndexFunc(*req.OrderID, isControl) >= 0:
		return v, invalid("order_id must not contain control characters")
	}
	v.OrderID = *req.OrderID
	amount, err := parseAmount(req.Amount)
	if err != nil {
		return v, err
	}
	v.Amount = amount
	switch {
	case req.Currency == nil:
		return v, invalid("currency is required")
	case !isISO4217(*req.Currency):
		return v, invalid("currency must be an ISO 4217 alphabetic code in upper case, e.g. USD")
	}
	v.Currency = *req.Currency
	switch {
	case req.PaymentMethod == nil:
		return v, invalid("payment_method is required")
	case !paymentMethodRE.MatchString(*req.PaymentMethod):
		return v, invalid("payment_method must be 1 to 255 characters of letters, digits and _-.:")
	}
	v.PaymentMethod = *req.PaymentMethod
	if req.Description != nil {
		switch {
		case utf8.RuneCountInString(*req.Description) > 1000:
			return v, invalid("description must be at most 1000 characters")
		case hasNUL(*req.Description):
			// PostgreSQL text cannot hold NUL: without this, every retry would be a 500.
			return v, invalid("description must not contain NUL characters (\\u0000)")
		}
	}
	v.Description = req.Description
	if err := validateMetadata(req.Metadata); err != nil {
		return v, err
	}
	v.Metadata = req.Metadata
	if req.CaptureMethod != nil {
		if *req.CaptureMethod != attempts.CaptureAutomatic && *req.CaptureMethod != attempts.CaptureManual {
			return v, invalid("capture_method must be automatic or manual")
		}
		v.CaptureMethod = *req.CaptureMethod
	}
	return v, nil
}

// decodeStrict decodes body, one JSON object with no unknown fields, into v.
// encoding/json would replace invalid UTF-8 in a string with U+FFFD and store
// something the client never sent: it is refused, naming where it is.
func decodeStrict(body []byte, v any) error {
	if !utf8.Valid(body) {
		return invalid("%s is not valid UTF-8", stringField(body, invalidUTF8))
	}
	if loneSurrogate(body) {
		// encoding/json would silently turn it into U+FFFD, as it would
		// raw invalid UTF-8.
		return invalid("%s holds a \\u escape of a lone UTF-16 surrogate, which is not a character", stringField(body, loneSurrogate))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	// Not dec.More(): it reports false for a trailing '}' or ']'.
	if _, err := dec.Token(); err != io.EOF {
		return invalid("request body must be a single JSON object")
	}
	return nil
}

// maxAmountDigits is how many digits MaxAmount has: a longer literal is out
// of range whatever its digits.
var maxAmountDigits = len(strconv.Itoa(MaxAmount))

// parseAmount reads the amount literal. It is judged by its spelling before
// any arithmetic: a number such as 1e999999 is valid JSON and would cost a
// general-purpose parser milliseconds of CPU per request.
func parseAmount(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, invalid("amount is required")
	}
	// The decoder has checked that raw is one JSON value; of those only a
	// run of digits, maybe negative, is an integer literal (not "500", a
	// bool, an array, an object, a fraction like 500.0 or an exponent like 5e2).
	digits, negative := strings.CutPrefix(string(raw), "-")
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, invalid("amount must be an integer in the currency's minor unit, without a fraction or an exponent")
	}
	if negative || len(digits) > maxAmountDigits {
		return 0, invalid("amount must be between 1 and %d", MaxAmount)
	}
	n, err := strconv.ParseInt(digits, 10, 64) // at most 11 digits: cannot overflow
	if err != nil || n < 1 || n > MaxAmount {
		return 0, invalid("amount must be between 1 and %d", MaxAmount)
	}
	return n, nil
}

func validateMetadata(m map[string]string) error {
	if len(m) > 50 {
		return invalid("metadata must have at most 50 keys")
	}
	for k, val := range m {
		switch {
		case k == "" || utf8.RuneCountInString(k) > 40:
			return invalid("metadata keys must be 1 to 40 characters")
		case hasNUL(k):
			return invalid("metadata keys must not contain NUL characters (\\u0000)")
		case utf8.RuneCountInString(val) > 500:
			return invalid("metadata[%q] must be at most 500 characters", k)
		case hasNUL(val):
			// jsonb cannot hold \u0000: without this, every retry would be a 500.
			return invalid("metadata[%q] must not contain NUL characters (\\u0000)", k)
		}
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

func hasNUL(s string) bool { return strings.IndexByte(s, 0) >= 0 }

func invalidUTF8(raw []byte) bool { return !utf8.Valid(raw) }

// loneSurrogate reports whether raw JSON text holds a \u escape of a UTF-16
// surrogate that is not half of a pair (high then low).
func loneSurrogate(raw []byte) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return false
	}
	hex4 := func(i int) (rune, bool) { // the \uXXXX escape at raw[i:], if any
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		return rune(n), err == nil
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		switch {
		case !ok:
			i++ // another escape: skip its character (it may be a backslash)
		case r >= 0xD800 && r <= 0xDBFF:
			if lo, ok := hex4(i + 6); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				i += 11 // the pair
			} else {
				return true
			}
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		default:
			i += 5
		}
	}
	return false
}

// stringField names where body first holds a string whose raw bytes are
// bad: a field's value ("description"), a metadata value (metadata["k"]) or
// key ("metadata keys"), a field name, or just "request body" when the bytes
// are outside any string. It walks the tokens and checks each one's raw
// bytes, since the tokens it returns are already repaired.
func stringField(body []byte, bad func(raw []byte) bool) string {
	type level struct {
		object  bool
		wantKey bool   // in an object, the next string is a key
		key     string // in an object, the key of the value being read
	}
	var stack []level
	// valueDone records that the value at the top of the stack is complete.
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
	name := func(isKey bool) string {
		switch {
		case len(stack) == 1 && isKey:
			return "a field name"
		case len(stack) == 1:
			return stack[0].key
		case len(stack) == 2 && stack[0].key == "metadata" && stack[1].object:
			if isKey {
				return "metadata keys"
			}
			return fmt.Sprintf("metadata[%q]", stack[1].key)
		case len(stack) > 1:
			return stack[0].key
		}
		return "request body"
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return "request body"
		}
		raw := body[start:dec.InputOffset()]
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				stack = append(stack, level{object: t == '{', wantKey: t == '{'})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			isKey := len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].wantKey
			if bad(raw) {
				return name(isKey)
			}
			if isKey {
				stack[len(stack)-1].key, stack[len(stack)-1].wantKey = t, false
			} else {
				valueDone()
			}
		default:
			valueDone()
		}
	}
}

// decodeError turns a JSON decoding error into a client-safe detail that
// names the field where it can.
func decodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return invalid("request body must be a JSON object")
		}
		return invalid("%s has the wrong type (%s)", field, typeErr.Value)
	case errors.As(err, &syntaxErr):
		return invalid("request body is not valid JSON (at byte %d)", syntaxErr.Offset)
	case errors.Is(err, io.EOF):
		return invalid("request body is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("request body is truncated JSON")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return invalid("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return invalid("request body is not valid: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// refundRequest is the body of POST /v1/payments/{id}/refunds.
type refundRequest struct {
	Amount   json.RawMessage   `json:"amount"`
	Reason   *string           `json:"reason"`
	Metadata map[string]string `json:"metadata"`
}

// decodeRefund parses and validates a refund body (every field optional)
// into the refund fields of a RefundInput.
func decodeRefund(body []byte) (payments.RefundInput, error) {
	var req refundRequest
	if err := decodeStrict(body, &req); err != nil {
		return payments.RefundInput{}, err
	}
	var v payments.RefundInput
	if len(req.Amount) > 0 && string(req.Amount) != "null" {
		amount, err := parseAmount(req.Amount)
		if err != nil {
			return v, err
		}
		v.Amount = &amount
	}
	if req.Reason != nil && !slices.Contains(refunds.Reasons, *req.Reason) {
		return v, invalid("reason must be one of %s", strings.Join(refunds.Reasons, ", "))
	}
	v.Reason = req.Reason
	if err := validateMetadata(req.Metadata); err != nil {
		return v, err
	}
	v.Metadata = req.Metadata
	return v, nil
}

// captureRequest is the body of POST /v1/payments/{id}/captures.
type captureRequest struct {
	Amount json.RawMessage `json:"amount"`
}

// decodeCapture parses and validates a capture body (amount optional: all
// that is authorized) into the capture fields of a CaptureInput.
func decodeCapture(body []byte) (payments.CaptureInput, error) {
	var req captureRequest
	if err := decodeStrict(body, &req); err != nil {
		return payments.CaptureInput{}, err
	}
	var v payments.CaptureInput
	if len(req.Amount) > 0 && string(req.Amount) != "null" {
		amount, err := parseAmount(req.Amount)
		if err != nil {
			return v, err
		}
		v.Amount = &amount
	}
	return v, nil
}

// voidRequest is the body of POST /v1/payments/{id}/voids.
type voidRequest struct {
	Reason *string `json:"reason"`
}

// decodeVoid parses and validates a void body (reason optional).
func decodeVoid(body []byte) (payments.VoidInput, error) {
	var req voidRequest
	if err := decodeStrict(body, &req); err != nil {
		return payments.VoidInput{}, err
	}
	if req.Reason != nil && !slices.Contains(captures.VoidReasons, *req.Reason) {
		return payments.VoidInput{}, invalid("reason must be one of %s", strings.Join(captures.VoidReasons, ", "))
	}
	return payments.VoidInput{Reason: req.Reason}, nil
}
