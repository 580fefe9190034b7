// Command providersim runs the payment-provider simulator (see package
// internal/providersim) until SIGINT or SIGTERM.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/acme/paymentsvc/internal/envflag"
	"github.com/acme/paymentsvc/internal/providersim"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run is main without the exit, returning the process status.
func run(args []string, stderr io.Writer) int {
	set := envflag.New("providersim")
	addr := set.String("SIM_ADDR", providersim.DefaultAddr, "listen address")
	apiKey := set.Secret("SIM_API_KEY", providersim.DefaultAPIKey, "API key clients send as Authorization: Bearer")
	stateFile := set.String("SIM_STATE_FILE", "", "file the state is persisted to (empty: memory only)")
	webhookURL := set.URL("SIM_WEBHOOK_URL", "", "URL webhooks are posted to (empty: no webhooks)")
	webhookSecret := set.Secret("SIM_WEBHOOK_SECRET", providersim.DefaultWebhookSecret, "secret webhooks are signed with")
	latency := set.Duration("SIM_LATENCY", 0, "delay spent in every charge call before the charge is created")
	authTTL := set.Duration("SIM_AUTH_TTL", providersim.DefaultAuthTTL, `how long a charge made with "capture":false stays capturable`)
	api := set.String("SIM_API", providersim.APISim, `wire format of the provider API: "sim" (the simulator's own) or "stripe" (the subset of Stripe's API the Stripe connector uses)`)
	if err := set.Parse(args, stderr); err != nil {
		return envflag.ExitCode(err)
	}
	if set.FlagSet().NArg() > 0 {
		fmt.Fprintf(stderr, "providersim takes no arguments, got %q\n", set.FlagSet().Args())
		set.FlagSet().Usage()
		return 2
	}

	log := slog.New(slog.NewJSONHandler(stderr, nil))
	sim, err := providersim.New(providersim.Config{
		Addr:          *addr,
		APIKey:        *apiKey,
		StateFile:     *stateFile,
		WebhookURL:    *webhookURL,
		WebhookSecret: *webhookSecret,
		Latency:       *latency,
		AuthTTL:       *authTTL,
		API:           *api,
		Logger:        log,
	})
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	serveErr := sim.ListenAndServe(ctx)
	closeErr := sim.Close()
	if serveErr != nil {
		log.Error("serve failed", "err", serveErr)
		return 1
	}
	if closeErr != nil {
		log.Error("close failed", "err", closeErr)
		return 1
	}
	log.Info("stopped")
	return 0
}
