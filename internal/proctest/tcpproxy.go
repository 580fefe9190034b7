package proctest

import (
	"testing"

	"github.com/acme/paymentsvc/internal/testkit"
)

// TCPProxy is testkit.TCPProxy, which tests of any package may use.
type TCPProxy = testkit.TCPProxy

// StartTCPProxy is testkit.StartTCPProxy.
func StartTCPProxy(t testing.TB, target string) *TCPProxy { return testkit.StartTCPProxy(t, target) }
