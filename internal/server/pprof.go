package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/acme/paymentsvc/internal/metrics"
	"github.com/acme/paymentsvc/internal/tenants"
)

// servePprof serves net/http/pprof on addr, a listener of its own (never the
// API's), until stop. It holds no secrets, but profiles show the code and
// its load: keep addr private (loopback, or a port nobody outside reaches).
func servePprof(addr string, log *slog.Logger) (stop func(), err error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return serveOwn("PPROF_ADDR", "pprof", addr, mux, log)
}

// serveMetrics serves GET /metrics on addr, a listener of its own, until
// stop (METRICS_ADDR): Prometheus scrapes it on a port that can stay
// private, while the API's listener no longer answers /metrics.
func serveMetrics(addr string, log *slog.Logger) (stop func(), err error) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler())
	return serveOwn("METRICS_ADDR", "metrics", addr, mux, log)
}

// serveOwn serves h on a listener of its own at addr (the setting's value),
// logging "<name> listening", until stop.
func serveOwn(setting, name, addr string, h http.Handler, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", setting, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(name+" listener stopped", "err", err)
		}
	}()
	log.Info(name+" listening", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// authCacheConfig is the authentication cache for AUTH_CACHE_TTL (0: off).
func authCacheConfig(ttl time.Duration) tenants.CacheConfig {
	if ttl == 0 {
		return tenants.CacheConfig{TTL: -1}
	}
	return tenants.CacheConfig{TTL: ttl}
}
