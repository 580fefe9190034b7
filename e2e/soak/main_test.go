// Package soak runs mixed load through real pods for a while and fails if a
// pod's memory, threads, goroutines or database connections keep growing
// (docs/BENCHMARKS.md, "Soak"). `make test` runs it for a minute; `make
// soak` for SOAK_DURATION (default 10 minutes).
package soak

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// TestMain skips the package under -short: it runs real processes for a
// minute at least.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("soak: skipped with -short (real processes for a minute); run make test or make soak")
		os.Exit(0)
	}
	os.Exit(m.Run())
}
