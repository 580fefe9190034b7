// Package ids makes the prefixed random identifiers of the service
// (pay_…, ten_…, evt_…, sk_…).
package ids

import (
	"crypto/rand"
	"encoding/hex"
)

// New returns prefix followed by 2n random hex characters.
func New(prefix string, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return prefix + hex.EncodeToString(b)
}
