package provider

import "errors"

// Operation names, used in errors (CallError.Op) and as the op label of
// metrics.
const (
	OpCharge  = "charge"
	OpLookup  = "lookup"
	OpList    = "list"
	OpRefund  = "refund"
	OpCapture = "capture"
	OpVoid    = "void"
)

// ErrEmptyKey refuses a lookup by an empty key or id, which would answer
// 404 and look like proof that no charge exists.
var ErrEmptyKey = errors.New("provider: empty idempotency key")

// IsRefundRefusal reports whether a refund's error code proves that nothing
// was refunded under the request.
func IsRefundRefusal(code string) bool { return refundRefusals[code] }

// IsHoldRefusal reports whether a capture's or void's error code proves that
// nothing was done under the request.
func IsHoldRefusal(code string) bool { return holdRefusals[code] }
