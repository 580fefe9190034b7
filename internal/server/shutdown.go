package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// MaxHeaderBytes bounds a request's header block (request line and fields)
// to 64 KiB: beyond it, 431. net/http reads 4 KiB more than the
// http.Server's MaxHeaderBytes before it refuses, so that field is set to
// this less those 4 KiB (headerSlack).
const MaxHeaderBytes = 64 << 10

// headerSlack is what net/http reads beyond http.Server.MaxHeaderBytes.
const headerSlack = 4 << 10

// newHTTPServer is the service's http.Server, with the connection count
// that shutdown reports when it has to cut requests off.
func newHTTPServer(handler http.Handler) (*http.Server, *connCount) {
	conns := &connCount{states: map[net.Conn]http.ConnState{}}
	// No WriteTimeout: a create may legitimately take the whole retry budget.
	return &http.Server{
		Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: MaxHeaderBytes - headerSlack, ConnState: conns.track,
	}, conns
}

// connCount knows the state of every open connection of the server.
type connCount struct {
	mu     sync.Mutex
	states map[net.Conn]http.ConnState
}

func (c *connCount) track(conn net.Conn, s http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s == http.StateClosed || s == http.StateHijacked {
		delete(c.states, conn)
		return
	}
	c.states[conn] = s
}

// active is how many connections have a request in flight (HTTP/1.1: one each).
func (c *connCount) active() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.states {
		if s == http.StateActive {
			n++
		}
	}
	return n
}

// drain stops srv after ctx (SIGTERM) ended Serve's wait: readiness turns
// 503 at once and the listener keeps serving for ShutdownDrainDelay, so that
// load balancers, which learn from the readiness probe, stop sending before
// new connections are refused; then the listener closes and the requests in
// flight (their provider calls and completing transactions included) get up
// to ShutdownTimeout to finish. Requests still running then are cut off
// (their payments are left as a crash would leave them, for a retry or the
// reconciler to resume) and logged; that is a normal end, not an error.
func drain(srv *http.Server, conns *connCount, serveErr <-chan error, cfg Config, draining *atomic.Bool, log *slog.Logger) error {
	// Not ready from before the line is logged, so whoever sees the line
	// never gets a 200 from /readyz again.
	draining.Store(true)
	if cfg.ShutdownDrainDelay > 0 {
		log.Info("shutting down: not ready, still serving", "drain_delay", cfg.ShutdownDrainDelay.String())
		select {
		case <-time.After(cfg.ShutdownDrainDelay):
		case err := <-serveErr:
			return err
		}
	}
	log.Info("shutting down: draining in-flight requests", "timeout", cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		log.Warn("shutdown timeout: cutting off the requests still in flight",
			"timeout", cfg.ShutdownTimeout.String(), "active_connections", conns.active())
		_ = srv.Close()
		err = nil
	}
	if err2 := <-serveErr; !errors.Is(err2, http.ErrServerClosed) && err == nil {
		err = err2
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
