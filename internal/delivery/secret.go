package delivery

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
)

// secretPrefix starts every signing secret; what follows is the standard
// padded base64 (RFC 4648 §4) of the key bytes, as Standard Webhooks says.
const secretPrefix = "whsec_"

// secretBytes is the length of a new signing key.
const secretBytes = 32

// newSecret returns a new signing secret: whsec_ and the base64 of 32
// random bytes.
func newSecret() string {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return secretPrefix + base64.StdEncoding.EncodeToString(b)
}

// errBadSecret is a stored secret that is not whsec_ and base64.
var errBadSecret = errors.New("delivery: malformed signing secret")

// secretKey is the HMAC key of secret: the bytes its base64 stands for.
func secretKey(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok {
		return nil, errBadSecret
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) == 0 {
		return nil, errBadSecret
	}
	return key, nil
}
