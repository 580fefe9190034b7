// Package console_test drives the operator console in a real browser:
// headless Debian chromium through chromedp, against a real paymentsvc
// process, the provider simulator and PostgreSQL. With
// CONSOLE_SCREENSHOTS=docs/console the tests save a screenshot of each page
// there (docs/console.md shows them).
package console_test

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// TestMain skips the package under -short, like e2e: every test starts
// processes and a browser.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e/console: skipped with -short (every test runs real processes and a browser)")
		os.Exit(0)
	}
	os.Exit(m.Run())
}
