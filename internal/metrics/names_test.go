package metrics

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// TestDocumentedMetricsExist checks that every paymentsvc_* name that the
// operations docs (alerts, queries) and the Grafana dashboard use is a
// metric this package defines, so a renamed metric cannot leave a silent
// alert or an empty panel behind.
func TestDocumentedMetricsExist(t *testing.T) {
	t.Parallel()
	defined := map[string]bool{}
	descs := make(chan *prometheus.Desc, 100)
	for _, c := range []prometheus.Collector{
		HTTPRequests, HTTPDuration, IdempotencyOutcomes, AttemptTransitions, RefundTransitions, CaptureTransitions,
		ProviderCalls, ProviderCallDuration, ProviderRetries, ProviderChargeOutcomes, ProviderRefundOutcomes, ProviderHoldOutcomes, BreakerState,
		WebhookOutcomes, OutboxPending, OutboxOldestAge, OutboxPublished, OutboxPublishErrors,
		MerchantWebhookAttempts, MerchantWebhookAttemptDuration, MerchantWebhookDeliveries, MerchantWebhookPending, MerchantWebhookOldestAge,
		NewBacklogCollector(nil, nil), DatabaseTimeouts, &poolCollector{},
	} {
		c.Describe(descs)
	}
	close(descs)
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		m := fqName.FindStringSubmatch(d.String())
		require.NotNil(t, m, "cannot read the name of %s", d)
		defined[m[1]] = true
	}
	used := regexp.MustCompile(`paymentsvc_[a-z_]+`)
	for _, file := range []string{"../../docs/operations.md", "../../deploy/grafana-dashboard.json"} {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		var unknown []string
		for _, name := range used.FindAllString(string(b), -1) {
			if strings.HasSuffix(name, "_") {
				continue // a family prefix in prose: paymentsvc_attempts_*
			}
			base := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if trimmed, ok := strings.CutSuffix(name, suffix); ok && defined[trimmed] {
					base = trimmed
				}
			}
			if !defined[base] && !slices.Contains(unknown, name) {
				unknown = append(unknown, name)
			}
		}
		require.Empty(t, unknown, "%s uses metrics that do not exist", file)
	}
}
