package outbox

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestEnsureStream runs against a private server, so that it may create and
// change the contract stream PAYMENTS.
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
	if !slices.Equal(cfg.Subjects, []string{"payments.>"}) || cfg.Storage != jetstream.FileStorage ||
		cfg.Duplicates != MinDuplicateWindow || cfg.Replicas != 1 {
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

	// A stream of that name on other subjects gets the relay's added; a
	// longer window is kept.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}, Duplicates: 15 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := ensureStream(ctx, js, "OTHER", []string{"mine.>"}, "mine.x", 1); err != nil {
		t.Fatalf("ensureStream: %v", err)
	}
	if got := streamConfig(ctx, t, js, "OTHER"); !slices.Equal(got.Subjects, []string{"other.>", "mine.>"}) || got.Duplicates != 15*time.Minute {
		t.Errorf("OTHER after ensureStream: subjects %q, duplicates %s", got.Subjects, got.Duplicates)
	}

	// A window is widened only up to the stream's MaxAge, which JetStream
	// requires it not to exceed.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SHORT", Subjects: []string{"short.>"}, MaxAge: 3 * time.Minute, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := ensureStream(ctx, js, "SHORT", []string{"short.>"}, "short.x", 1); err != nil {
		t.Fatalf("ensureStream: %v", err)
	}
	if got := streamConfig(ctx, t, js, "SHORT"); got.Duplicates != 3*time.Minute {
		t.Errorf("SHORT after ensureStream: duplicates %s, want its MaxAge 3m", got.Duplicates)
	}

	// More replicas than a single server has are refused by the server; the
	// relay asks for them only when creating the stream.
	if err := ensureStream(ctx, js, "THREE", []string{"three.>"}, "three.x", 3); err == nil {
		t.Error("a stream with 3 replicas was created on a single server")
	}
	if err := ensureStream(ctx, js, "PAYMENTS", []string{"payments.>"}, "payments.succeeded", 3); err != nil {
		t.Errorf("ensureStream on the existing PAYMENTS with 3 replicas asked: %v", err)
	}
	if got := streamConfig(ctx, t, js, "PAYMENTS"); got.Replicas != 1 {
		t.Errorf("existing PAYMENTS now has %d replicas; it must be left as it is", got.Replicas)
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
