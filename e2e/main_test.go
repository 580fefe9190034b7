package e2e

import (
	"flag"
	"fmt"
	"os"
	"testing"
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
