// Package testkit holds the small helpers every test package shares: a
// random id, polling until a condition holds, and a TCP port reserved for
// the test. It imports nothing of this project but internal/ids, so that any
// package's own tests may use it.
package testkit

import (
	"testing"
	"time"

	"github.com/acme/paymentsvc/internal/ids"
)

// RandomID returns prefix followed by 12 random hex characters, for ids,
// keys, names and secrets that must not collide with another test's.
func RandomID(prefix string) string { return ids.New(prefix, 6) }

// PollInterval is how often Eventually asks its condition again.
const PollInterval = 10 * time.Millisecond

// Eventually calls cond every PollInterval until it returns true, and fails
// t with msg if it has not within timeout. cond runs on the caller's
// goroutine, so unlike testify's require.Eventually it may itself call
// require (or t.Fatal) to stop at an answer that can never change.
func Eventually(t testing.TB, timeout time.Duration, msg string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", timeout, msg)
		}
		<-tick.C
	}
}
