package e2e

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/acme/paymentsvc/internal/proctest"
)

// TestMain skips the package under -short (`make test-short`): every test
// here starts real pods, simulators and databases, and the chaos test alone
// takes minutes on a two-core machine.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped with -short (every test runs real processes); run make test for them")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// declineCode is the failure_code of a payment with pm_card_declined on
// the provider type the suite runs on: the simulator's own API answers
// card_declined; Stripe (and the simulator's Stripe face) answers the
// decline's decline_code, generic_decline (the contract's "decline_code,
// else code").
func declineCode(t *testing.T) string {
	if proctest.ProviderType(t) == proctest.ProviderTypeStripe {
		return "generic_decline"
	}
	return "card_declined"
}
