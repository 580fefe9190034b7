package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/acme/paymentsvc/internal/app"
	"github.com/acme/paymentsvc/internal/console"
	"github.com/acme/paymentsvc/internal/delivery"
	"github.com/acme/paymentsvc/internal/operators"
)

// ConsoleOff is the CONSOLE_ADDR that serves no console.
const ConsoleOff = "off"

// serveConsole serves the operator console on cfg.ConsoleAddr, a listener
// of its own (never the tenant API's), until stop, which lets its requests
// finish for up to grace. Nothing is served when the address is "off".
func serveConsole(cfg Config, a *app.App, log *slog.Logger) (stop func(grace time.Duration), err error) {
	if cfg.ConsoleAddr == ConsoleOff {
		return func(time.Duration) {}, nil
	}
	ln, err := net.Listen("tcp", cfg.ConsoleAddr)
	if err != nil {
		return nil, fmt.Errorf("CONSOLE_ADDR %s: %w", cfg.ConsoleAddr, err)
	}
	handler := console.New(console.Deps{
		Pool: a.Pool, Payments: a.Payments, Log: log, SecureCookie: cfg.ConsoleSecureCookie,
		Sessions:  operators.NewSessions(a.Pool, operators.Config{IdleTimeout: cfg.ConsoleSessionTTL}),
		Endpoints: delivery.NewEndpoints(a.Pool, delivery.EndpointsConfig{AllowHTTP: cfg.MerchantWebhook.AllowHTTP}),
	})
	srv, _ := newHTTPServer(handler)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("console listener stopped", "err", err)
		}
	}()
	log.Info("console listening", "addr", ln.Addr().String(), "url", "http://"+ln.Addr().String()+"/console/")
	return func(grace time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
	}, nil
}
