package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/testkit"
)

// Provider timings of the provider partition test: a silent provider is a
// timeout, answered UNKNOWN within PROVIDER_RETRY_BUDGET +
// PROVIDER_CALL_TIMEOUT + 1 s (§19).
const (
	peerCallTimeout = 2 * time.Second
	peerRetryBudget = time.Second
	unknownBound    = peerRetryBudget + peerCallTimeout + time.Second
)

// A provider that stops answering (connections open, nothing comes back)
// makes a payment UNKNOWN (202) within the budget, never a hang; once it
// answers again (and gets what was held: the charges it was asked for) the
// payments resolve, by a retry with the key or by the reconciler, each
// charged once.
func TestProviderPartition(t *testing.T) {
	t.Parallel()
	var proxy *testkit.TCPProxy
	s := setupOps(t, opsOptions{
		podEnv: []string{
			"PROVIDER_CALL_TIMEOUT=" + peerCallTimeout.String(), "PROVIDER_RETRY_BUDGET=" + peerRetryBudget.String(),
			"IDEMPOTENCY_LOCK_TTL=5s", "PROVIDER_BREAKER_FAILURES=20",
		},
		podProviderURL: func(simURL string) string {
			u, err := url.Parse(simURL)
			require.NoError(t, err)
			proxy = testkit.StartTCPProxy(t, u.Host)
			return proxy.URL(t, simURL)
		},
	})
	ok := s.client.MustPay(t, "prov-before", apiclient.Visa("o-prov-before", 100))
	require.Equal(t, http.StatusCreated, ok.Status, "%s", ok)

	proxy.Blackhole()
	unknown := map[string]string{} // key → payment id
	for _, key := range []string{"prov-retried", "prov-reconciled"} {
		a := timed(func() (apiclient.Response, error) { return s.client.Pay(key, apiclient.Visa("o-"+key, 200)) })
		require.NoError(t, a.err)
		require.Equal(t, http.StatusAccepted, a.r.Status, "%s: %s", key, a.r)
		require.Equal(t, "UNKNOWN", a.r.Str("status"), "%s", a.r)
		require.Less(t, a.took(), unknownBound, "%s answered after %s", key, a.took())
		unknown[key] = a.r.Str("id")
	}

	proxy.Heal()
	testkit.Eventually(t, 30*time.Second, "the provider gets the held charge calls", func() bool {
		return s.sim.Stats(t).Charges == 3
	})
	r := s.client.MustPay(t, "prov-retried", apiclient.Visa("o-prov-retried", 200))
	require.Equal(t, http.StatusCreated, r.Status, "the retry resolves it: %s", r)
	require.Equal(t, unknown["prov-retried"], r.Str("id"))

	b := proctest.Build(t)
	out, errOut, code, err := proctest.Run(context.Background(), b.Reconciler, []string{"run", "--min-age", "0s"}, []string{
		"DATABASE_URL=" + s.db.URL, "PROVIDER_URL=" + s.sim.URL(), "IDEMPOTENCY_LOCK_TTL=5s",
		"PROVIDER_CALL_TIMEOUT=" + peerCallTimeout.String(), "PROVIDER_RETRY_BUDGET=" + peerRetryBudget.String(),
	})
	require.NoError(t, err)
	require.Equal(t, 0, code, "reconciler run: %s\n%s", out, errOut)
	got := opsOK(t)(s.client.Get("/v1/payments/" + unknown["prov-reconciled"]))
	require.Equal(t, "SUCCEEDED", got.Str("status"), "the reconciler resolves the other: %s\n%s", got, out)
	for _, id := range []string{ok.Str("id"), unknown["prov-retried"], unknown["prov-reconciled"]} {
		require.Equal(t, 1, s.sim.SucceededChargesFor(t, id), "payment %s charged once", id)
	}
}

// A NATS server that stops answering never slows a payment: they all
// succeed while it is silent, as they do with it up. Once it answers again
// (on new connections only) their events reach the stream within 10 s,
// each once.
func TestNATSPartition(t *testing.T) {
	t.Parallel()
	srv := testkit.StartNATSServer(t) // the pod's own stream, shared with nobody
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	proxy := testkit.StartTCPProxy(t, u.Host)
	s := setupOps(t, opsOptions{podEnv: []string{"OUTBOX_RELAY=on", "NATS_URL=" + proxy.URL(t, srv.URL)}})
	_, js := testkit.JetStream(t, srv.URL)

	pay := func(prefix string, n int) (ids []string, took []time.Duration) {
		for i := range n {
			key := fmt.Sprintf("%s-%d", prefix, i)
			a := timed(func() (apiclient.Response, error) { return s.client.Pay(key, apiclient.Visa("o-"+key, 100)) })
			require.NoError(t, a.err, key)
			require.Equal(t, http.StatusCreated, a.r.Status, "%s: %s", key, a.r)
			ids, took = append(ids, a.r.Str("id")), append(took, a.took())
		}
		return ids, took
	}
	up, upTook := pay("nats-up", 5)
	requireEventsOnce(t, js, up, 30*time.Second)

	proxy.Blackhole()
	silent, silentTook := pay("nats-silent", 5)
	t.Logf("create latency with NATS up %v, with NATS silent %v", upTook, silentTook)
	proxy.HealNewConnections()
	requireEventsOnce(t, js, append(up, silent...), 10*time.Second)
}

// requireEventsOnce waits (within) until the PAYMENTS stream holds exactly
// one PaymentSucceeded for each payment of ids, and nothing else.
func requireEventsOnce(t *testing.T, js jetstream.JetStream, ids []string, within time.Duration) {
	t.Helper()
	var counts map[string]int
	testkit.Eventually(t, within, "an event for each payment", func() bool {
		counts = streamSubjects(t, js)
		return len(counts) == len(ids)
	})
	for _, id := range ids {
		require.Equal(t, 1, counts[id], "events of %s", id)
	}
}

// streamSubjects counts the PaymentSucceeded events in the PAYMENTS stream
// by payment id (0 messages while the stream does not exist yet).
func streamSubjects(t *testing.T, js jetstream.JetStream) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	counts := map[string]int{}
	stream, err := js.Stream(ctx, outbox.DefaultStream)
	if err != nil {
		return counts
	}
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	if info.State.Msgs == 0 {
		return counts
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	batch, err := cons.Fetch(int(info.State.Msgs), jetstream.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	for m := range batch.Messages() {
		var ev struct {
			Type string `json:"type"`
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(m.Data(), &ev))
		require.Equal(t, "PaymentSucceeded", ev.Type)
		counts[ev.Data.ID]++
	}
	require.NoError(t, batch.Error())
	return counts
}
