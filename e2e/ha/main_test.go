//go:build ha

// Package ha runs paymentsvc on a real high-availability stack (a
// pg_auto_failover primary with its synchronous standby, a three-node
// JetStream cluster) under steady payment traffic, fails parts of it, and
// checks that nothing acknowledged was lost or doubled. Run it with
// `make test-ha`; it needs pg_autoctl (postgresql-15-auto-failover) and
// nats-server, and root (pg_autoctl runs as the postgres user).
package ha

import (
	"os"
	"testing"

	"github.com/acme/paymentsvc/internal/hatest"
)

func TestMain(m *testing.M) {
	hatest.RunGuardIfAsked()
	os.Exit(m.Run())
}
