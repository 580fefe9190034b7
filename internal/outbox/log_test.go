package outbox_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/testkit"
)

// The relay's startup line gives its poll interval as duration text
// ("50ms"), like every duration in the logs, not as integer nanoseconds.
func TestRelayLogsDurationsAsText(t *testing.T) {
	t.Parallel()
	b := setup(t, testkit.NATSURL())
	var out testkit.SyncBuffer
	cfg := b.cfg
	cfg.Logger = slog.New(slog.NewJSONHandler(&out, nil))
	runRelay(t, newRelay(t, b.db.Pool, cfg))
	var running map[string]any
	testkit.Eventually(t, 30*time.Second, "the relay logs that it runs", func() bool {
		for _, l := range strings.Split(out.String(), "\n") {
			var line map[string]any
			if json.Unmarshal([]byte(l), &line) == nil && line["msg"] == "outbox relay running" {
				running = line
				return true
			}
		}
		return false
	})
	require.Equal(t, "50ms", running["poll_interval"], "%v", running)
}
