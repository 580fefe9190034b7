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
	srv := startNATSServer(t)
	_, js := testkit.JetStream(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for range 2 { // creates, then finds it as it wants it
		require.NoError(t, outbox.EnsureStream(ctx, js))
	}
	cfg := streamConfig(ctx, t, js, "PAYMENTS")
	require.Equal(t, []string{"payments.>"}, cfg.Subjects)
	require.Equal(t, jetstream.FileStorage, cfg.Storage)
	require.GreaterOrEqual(t, cfg.Duplicates, 2*time.Minute)

	// An operator's settings survive; only what the relay needs is widened.
	cfg.MaxAge = 72 * time.Hour
	cfg.Duplicates = 30 * time.Second
	_, err := js.UpdateStream(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, outbox.EnsureStream(ctx, js), "EnsureStream on a tuned stream")
	got := streamConfig(ctx, t, js, "PAYMENTS")
	require.Equal(t, 72*time.Hour, got.MaxAge)
	require.Equal(t, outbox.MinDuplicateWindow, got.Duplicates)

	// A stream of that name on other subjects gets the relay's added.
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}, Duplicates: 5 * time.Minute})
	require.NoError(t, err)
	require.NoError(t, outbox.EnsureStreamNamed(ctx, js, "OTHER", []string{"mine.>"}, []string{"mine.x"}))
	got = streamConfig(ctx, t, js, "OTHER")
	require.Equal(t, []string{"other.>", "mine.>"}, got.Subjects)
	require.Equal(t, 5*time.Minute, got.Duplicates)
}

func streamConfig(ctx context.Context, t *testing.T, js jetstream.JetStream, name string) jetstream.StreamConfig {
	t.Helper()
	s, err := js.Stream(ctx, name)
	require.NoError(t, err, "stream %s", name)
	return s.CachedInfo().Config
}
