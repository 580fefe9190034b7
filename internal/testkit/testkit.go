// Package testkit holds the small helpers every test package shares: a
// random id, polling until a condition holds, a TCP port reserved for the
// test, a TCP proxy that cuts or blackholes what it forwards, and a private
// nats-server. It imports nothing of this project but internal/ids, so that any
// package's own tests may use it.
package testkit

import (
	"context"
	"log/slog"
	"sync"
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

// Together runs fn(0) … fn(n-1), each on a goroutine of its own, released
// at the same moment by closing a channel, and returns when all have
// returned. fn must not fail the test (only the test's goroutine may):
// it keeps what it got, for the test to check afterwards.
func Together(n int, fn func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	close(start)
	wg.Wait()
}

// Background runs run on a goroutine with a context that ends when the
// returned stop is called or t ends (a relay's or a consumer's Run). stop,
// on the test's goroutine, waits at most 30s for run to return and
// requires it to have returned nil; calling it again does nothing.
func Background(t testing.TB, run func(ctx context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("returned %v after its context ended", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("did not return within 30s of its context ending")
		}
	})
	t.Cleanup(stop)
	return stop
}

// Logger logs warnings and errors through t, so that a failing test shows
// what the component under test saw (a relay's, a deliverer's logs).
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
