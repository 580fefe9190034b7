package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/testkit"
)

// TestEnsureStream runs against a private server, so that it may create and
// change the stream PAYMENTS that docs/operations.md names.
func TestEnsureStream(t *testing.T) {
	t.Parallel()
	srv := testkit.StartNATSServer(t)
	_, js := testkit.JetStream(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for range 2 { // creates, then finds it as it wants it
		require.NoError(t, outbox.EnsureStream(ctx, js))
	}
	cfg := streamConfig(ctx, t, js, "PAYMENTS")
	require.Equal(t, []string{"payments.>"}, cfg.Subjects)
	require.Equal(t, jetstream.FileStorage, cfg.Storage)
	require.Equal(t, outbox.MinDuplicateWindow, cfg.Duplicates)
	require.Equal(t, 1, cfg.Replicas)

	// An operator's settings survive; only what the relay needs is widened.
	cfg.MaxAge = 72 * time.Hour
	cfg.Duplicates = 30 * time.Second
	_, err := js.UpdateStream(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, outbox.EnsureStream(ctx, js), "EnsureStream on a tuned stream")
	got := streamConfig(ctx, t, js, "PAYMENTS")
	require.Equal(t, 72*time.Hour, got.MaxAge)
	require.Equal(t, outbox.MinDuplicateWindow, got.Duplicates)

	// A stream of that name on other subjects gets the relay's added; a
	// longer window is kept.
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}, Duplicates: 15 * time.Minute})
	require.NoError(t, err)
	require.NoError(t, outbox.EnsureStreamNamed(ctx, js, "OTHER", []string{"mine.>"}, []string{"mine.x"}, 1))
	got = streamConfig(ctx, t, js, "OTHER")
	require.Equal(t, []string{"other.>", "mine.>"}, got.Subjects)
	require.Equal(t, 15*time.Minute, got.Duplicates)

	// A window is widened only up to the stream's MaxAge, which JetStream
	// requires it not to exceed.
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "SHORT", Subjects: []string{"short.>"}, MaxAge: 3 * time.Minute, Duplicates: time.Minute})
	require.NoError(t, err)
	require.NoError(t, outbox.EnsureStreamNamed(ctx, js, "SHORT", []string{"short.>"}, []string{"short.x"}, 1))
	require.Equal(t, 3*time.Minute, streamConfig(ctx, t, js, "SHORT").Duplicates, "SHORT's window, capped at its MaxAge")

	// More replicas than a single server has are refused by the server; the
	// relay asks for them only when creating the stream.
	require.Error(t, outbox.EnsureStreamNamed(ctx, js, "THREE", []string{"three.>"}, []string{"three.x"}, 3), "3 replicas on a single server")
	require.NoError(t, outbox.EnsureStreamNamed(ctx, js, "PAYMENTS", []string{"payments.>"}, []string{"payments.succeeded"}, 3))
	require.Equal(t, 1, streamConfig(ctx, t, js, "PAYMENTS").Replicas, "an existing stream is left as it is")
}

func streamConfig(ctx context.Context, t *testing.T, js jetstream.JetStream, name string) jetstream.StreamConfig {
	t.Helper()
	s, err := js.Stream(ctx, name)
	require.NoError(t, err, "stream %s", name)
	return s.CachedInfo().Config
}

// TestEnsureStreamWidensAStreamOfPaymentSucceededOnly: a PAYMENTS stream an
// operator made for the one subject docs/operations.md first named
// (payments.succeeded) must get the subjects of the other events added.
// Adding payments.> to it is refused (it overlaps payments.succeeded), and a
// relay that only tried that would publish nothing at all, forever.
func TestEnsureStreamWidensAStreamOfPaymentSucceededOnly(t *testing.T) {
	t.Parallel()
	srv := testkit.StartNATSServer(t)
	_, js := testkit.JetStream(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PAYMENTS", Subjects: []string{"payments.succeeded"}, Duplicates: 2 * time.Minute})
	require.NoError(t, err)

	require.NoError(t, outbox.EnsureStream(ctx, js))
	got := streamConfig(ctx, t, js, "PAYMENTS")
	require.Equal(t, []string{"payments.succeeded", "payments.failed", "payments.refunded", "payments.refund_failed", "payments.authorized", "payments.canceled"}, got.Subjects)
	require.Equal(t, outbox.MinDuplicateWindow, got.Duplicates)
	require.NoError(t, outbox.EnsureStream(ctx, js), "EnsureStream again: nothing left to change")
	require.Equal(t, got.Subjects, streamConfig(ctx, t, js, "PAYMENTS").Subjects)
}
