package providersim

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// SignatureHeader is the Sim-Signature header value for a webhook body sent at
// unix time ts: "t=<ts>,v1=<lower-case hex HMAC-SHA256(secret, "<ts>.<body>")>".
// Signing the timestamp with the body lets a receiver refuse stale replays.
func SignatureHeader(secret string, ts int64, body []byte) string {
	t := strconv.FormatInt(ts, 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(t))
	mac.Write([]byte("."))
	mac.Write(body)
	return "t=" + t + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}
