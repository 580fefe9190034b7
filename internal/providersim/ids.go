package providersim

import (
	"crypto/rand"
	"encoding/hex"
)

// newID returns prefix followed by 24 random hex characters (96 bits), enough
// that two simulators sharing a webhook receiver never collide.
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails; it crashes the program instead.
	return prefix + hex.EncodeToString(b[:])
}
