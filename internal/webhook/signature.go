package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Signature errors. Verify wraps them with a reason that never contains the
// header, the signature or a secret, so they are safe to log and to send.
var (
	// ErrMissingSignature is a request without a Sim-Signature header.
	ErrMissingSignature = errors.New("missing signature header")
	// ErrMalformedSignature is a header that is not "t=UNIX,v1=HEX[,…]".
	ErrMalformedSignature = errors.New("malformed signature header")
	// ErrStaleSignature is an authentic signature whose timestamp is outside
	// the tolerance: a replay, or a clock that is far off.
	ErrStaleSignature = errors.New("signature timestamp outside tolerance")
	// ErrSignatureMismatch is a header none of whose v1 values is the HMAC
	// of the body under any accepted secret.
	ErrSignatureMismatch = errors.New("signature does not match")
)

// Tolerance is how far a signature's timestamp may be from now, either side.
const Tolerance = 300 * time.Second

// ows is HTTP's optional whitespace, allowed around items; other Unicode
// spaces are not, so "\u2000t=1" is an unknown scheme, not t.
const ows = " \t"

// signatureLen is the length of an HMAC-SHA256 in bytes.
const signatureLen = sha256.Size

// ParseSignatureHeader parses "t=UNIX,v1=HEX[,v1=HEX…]": comma-separated
// key=value items, exactly one t (a non-negative decimal Unix time), at least
// one v1 (hex of 32 bytes). Items of other schemes are ignored so the
// provider can add schemes without breaking us; anything else is malformed.
func ParseSignatureHeader(h string) (ts int64, sigs [][]byte, err error) {
	if strings.Trim(h, ows) == "" {
		return 0, nil, ErrMissingSignature
	}
	seenT := false
	for item := range strings.SplitSeq(h, ",") {
		k, v, ok := strings.Cut(strings.Trim(item, ows), "=")
		if !ok || k == "" {
			return 0, nil, fmt.Errorf("%w: item is not key=value", ErrMalformedSignature)
		}
		switch k {
		case "t":
			if seenT {
				return 0, nil, fmt.Errorf("%w: more than one t", ErrMalformedSignature)
			}
			seenT = true
			if ts, err = parseUnix(v); err != nil {
				return 0, nil, err
			}
		case "v1":
			sig, err := hex.DecodeString(v)
			if err != nil || len(sig) != signatureLen {
				return 0, nil, fmt.Errorf("%w: v1 is not %d hex-encoded bytes", ErrMalformedSignature, signatureLen)
			}
			sigs = append(sigs, sig)
		}
	}
	if !seenT {
		return 0, nil, fmt.Errorf("%w: no t", ErrMalformedSignature)
	}
	if len(sigs) == 0 {
		return 0, nil, fmt.Errorf("%w: no v1", ErrMalformedSignature)
	}
	return ts, sigs, nil
}

// parseUnix accepts only plain digits: strconv alone would take "+1" or "-1".
func parseUnix(v string) (int64, error) {
	if v == "" || strings.TrimLeft(v, "0123456789") != "" {
		return 0, fmt.Errorf("%w: t is not a Unix time", ErrMalformedSignature)
	}
	ts, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: t is out of range", ErrMalformedSignature)
	}
	return ts, nil
}

// Verify checks that header signs body under one of secrets and that its
// timestamp is within tolerance of now, either side. Every v1 is compared in
// constant time (hmac.Equal) against the HMAC under every secret, so a header
// carrying the signatures of an old and a new secret verifies during
// rotation. Empty secrets are ignored: they would accept anyone's signature.
// The signature is checked before the timestamp, so ErrStaleSignature means
// the request was authentic but old.
func Verify(header string, body []byte, secrets []string, now time.Time, tolerance time.Duration) error {
	ts, sigs, err := ParseSignatureHeader(header)
	if err != nil {
		return err
	}
	if !matchesAny(ts, body, secrets, sigs) {
		return ErrSignatureMismatch
	}
	// Whole seconds, as the header carries: 300s tolerance accepts t exactly
	// 300s away and refuses 301s, whatever the sub-second part of now.
	limit := int64(tolerance / time.Second)
	if ts < now.Unix()-limit || ts > now.Unix()+limit {
		return ErrStaleSignature
	}
	return nil
}

func matchesAny(ts int64, body []byte, secrets []string, sigs [][]byte) bool {
	prefix := strconv.FormatInt(ts, 10) + "."
	for _, secret := range secrets {
		if secret == "" {
			continue
		}
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(prefix))
		mac.Write(body)
		want := mac.Sum(nil)
		for _, sig := range sigs {
			if hmac.Equal(want, sig) {
				return true
			}
		}
	}
	return false
}
