package outbox

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestEnsureStream runs against a private server, so that it may create and
// change the stream PAYMENTS that docs/operations.md names.
func TestEnsureStream(t *testing.T) {
	t.Parallel()
	srv := startNATSServer(t)
	_, js := connectJS(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for range 2 { // creates, then finds it as it wants it
		if err := EnsureStream(ctx, js); err != nil {
			t.Fatalf("EnsureStream: %v", err)
		}
	}
	cfg := streamConfig(ctx, t, js, "PAYMENTS")
	if !slices.Equal(cfg.Subjects, []string{"payments.>"}) || cfg.Storage != jetstream.FileStorage || cfg.Duplicates < 2*time.Minute {
		t.Fatalf("created %+v", cfg)
	}

	// An operator's settings survive; only what the relay needs is widened.
	cfg.MaxAge = 72 * time.Hour
	cfg.Duplicates = 30 * time.Second
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := EnsureStream(ctx, js); err != nil {
		t.Fatalf("EnsureStream on a tuned stream: %v", err)
	}
	got := streamConfig(ctx, t, js, "PAYMENTS")
	if got.MaxAge != 72*time.Hour || got.Duplicates != MinDuplicateWindow {
		t.Errorf("after EnsureStream MaxAge %s, Duplicates %s; want 72h, %s", got.MaxAge, got.Duplicates, MinDuplicateWindow)
	}

	// A stream of that name on other subjects gets the relay's added.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}, Duplicates: 5 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := ensureStream(ctx, js, "OTHER", []string{"mine.>"}, []string{"mine.x"}); err != nil {
		t.Fatalf("ensureStream: %v", err)
	}
	if got := streamConfig(ctx, t, js, "OTHER"); !slices.Equal(got.Subjects, []string{"other.>", "mine.>"}) || got.Duplicates != 5*time.Minute {
		t.Errorf("OTHER after ensureStream: subjects %q, duplicates %s", got.Subjects, got.Duplicates)
	}
}

func streamConfig(ctx context.Context, t *testing.T, js jetstream.JetStream, name string) jetstream.StreamConfig {
	t.Helper()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	return s.CachedInfo().Config
}
