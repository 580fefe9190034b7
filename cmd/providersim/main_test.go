package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/proctest"
)

// runSim runs the binary with args and env to completion (a minute at most,
// not counting its build, which a busy machine may take minutes over) and
// returns its exit status and output.
func runSim(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	bin := proctest.Build(t).ProviderSim // before the deadline: a first build on a busy machine takes a while
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stdout, stderr, code, err := proctest.Run(ctx, bin, args, env)
	require.NoError(t, err, "run providersim %v", args)
	return code, stdout + stderr
}

func TestBinary(t *testing.T) {
	t.Parallel()
	t.Run("help exits 0", func(t *testing.T) {
		t.Parallel()
		code, out := runSim(t, []string{"SIM_API_KEY=sk_never_printed", "SIM_WEBHOOK_URL=https://u:s3cret@hooks.example/in"}, "-h")
		require.Equal(t, 0, code, "-h: %s", out)
		require.Contains(t, out, "--sim-addr")
		require.NotContains(t, out, "sk_never_printed", "usage prints the API key")
		require.NotContains(t, out, "s3cret", "usage prints the webhook URL's password")
		require.Contains(t, out, "https://u:***@hooks.example/in", "usage shows the webhook URL masked")
	})
	t.Run("bad flag exits 2", func(t *testing.T) {
		t.Parallel()
		code, out := runSim(t, nil, "--bogus")
		require.Equal(t, 2, code, "--bogus: %s", out)
	})
	t.Run("bad environment exits 2", func(t *testing.T) {
		t.Parallel()
		code, out := runSim(t, []string{"SIM_LATENCY=soon"})
		require.Equal(t, 2, code, "SIM_LATENCY=soon: %s", out)
	})
	t.Run("unknown SIM_API exits 1", func(t *testing.T) {
		t.Parallel()
		code, out := runSim(t, []string{"SIM_ADDR=127.0.0.1:0", "SIM_API=paypal"})
		require.Equal(t, 1, code, "SIM_API=paypal: %s", out)
		require.Contains(t, out, `API \"paypal\" is not sim or stripe`)
	})
	t.Run("SIM_API=stripe serves Stripe's API", func(t *testing.T) {
		t.Parallel()
		sim := proctest.StartSim(t, proctest.SimOptions{API: proctest.ProviderTypeStripe})
		c := proctest.NewClient(sim.URL(), "sk_sim")
		r, err := c.Do(http.MethodGet, "/v1/payment_intents?limit=1", nil, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r)
		require.JSONEq(t, `{"object":"list","data":[],"has_more":false,"url":"/v1/payment_intents"}`, string(r.Raw))
	})
	t.Run("serves until SIGTERM", func(t *testing.T) {
		t.Parallel()
		serveUntilSIGTERM(t)
	})
}

// serveUntilSIGTERM starts the binary on a free port, charges and refunds through it,
// stops it with SIGTERM and checks the exit status and the logs.
func serveUntilSIGTERM(t *testing.T) {
	const apiKey, secret = "sk_e2e_secret", "whsec_e2e_secret"
	p := proctest.StartProcess(t, "providersim", proctest.Build(t).ProviderSim, []string{"--sim-addr", "127.0.0.1:0"}, []string{
		"SIM_API_KEY=" + apiKey, "SIM_WEBHOOK_SECRET=" + secret, "SIM_STATE_FILE=" + filepath.Join(t.TempDir(), "state.json"),
	})

	c := &apiclient.Client{BaseURL: p.URL(), APIKey: apiKey, HTTP: apiclient.NoKeepAlive()}
	r, err := c.Do(http.MethodPost, "/v1/charges",
		[]byte(`{"amount":500,"currency":"USD","payment_method":"pm_card_visa","reference":"pay_e2e"}`),
		map[string]string{"Idempotency-Key": "k-e2e", "Content-Type": "application/json"})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, "charge: %s", r)

	var charge struct{ ID string }
	require.NoError(t, json.Unmarshal(r.Raw, &charge))
	r, err = c.Do(http.MethodPost, "/v1/refunds",
		[]byte(`{"charge":"`+charge.ID+`","amount":200,"reference":"rfd_e2e"}`),
		map[string]string{"Idempotency-Key": "k-e2e-refund", "Content-Type": "application/json"})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, "refund: %s", r)
	var refund struct {
		Charge string
		Amount int64
	}
	require.NoError(t, json.Unmarshal(r.Raw, &refund))
	require.Equal(t, charge.ID, refund.Charge)
	require.EqualValues(t, 200, refund.Amount)

	require.NoError(t, p.Signal(syscall.SIGTERM))
	code, err := p.Wait(30 * time.Second)
	require.NoError(t, err, "exit after SIGTERM")
	require.Equal(t, 0, code, "exit status after SIGTERM: %s", p.Logs())
	for _, s := range []string{apiKey, secret} {
		require.False(t, strings.Contains(p.Logs(), s), "the logs contain a secret:\n%s", p.Logs())
	}
}
