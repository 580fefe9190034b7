package testkit

import (
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSURL is the NATS server (with JetStream) the tests share:
// TEST_NATS_URL, or the local one of the development machine and CI.
func NATSURL() string {
	if u := os.Getenv("TEST_NATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// JetStream connects to the NATS server at url for t, reconnecting for as
// long as t runs (a test may stop and restart its server), and fails t
// (never skips it) when the server cannot be reached.
func JetStream(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to NATS at %s (is nats-server running with -js?): %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream at %s: %v", url, err)
	}
	return nc, js
}
