package providersim

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

// shutdownTimeout bounds how long ListenAndServe waits for in-flight requests,
// which may be sleeping a configured latency.
const shutdownTimeout = 10 * time.Second

// Server is the simulator: its HTTP API, state, faults and webhook sender.
type Server struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	handler http.Handler
	hooks   *webhookSender // nil when no webhook URL is configured

	// chargeCalls, refundCalls and webhooksSent are counters bumped outside
	// mu so that a call waiting on a state-file write is still counted at once.
	chargeCalls  atomic.Int64
	refundCalls  atomic.Int64
	captureCalls atomic.Int64
	voidCalls    atomic.Int64
	webhooksSent atomic.Int64

	mu sync.Mutex // guards st and serialises state-file writes
	st *state

	faultsMu      sync.RWMutex
	faults        Faults
	defaultFaults Faults

	closeOnce sync.Once
	closeErr  error
}

// New builds a Server from cfg, loading cfg.StateFile when it exists.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg,
		log: cfg.Logger,
		now: cfg.now,
		st:  newState(),
		// Sub-millisecond latency is not worth a separate field in Faults.
		defaultFaults: Faults{LatencyMS: int(cfg.Latency / time.Millisecond)},
	}
	s.faults = s.defaultFaults
	if cfg.StateFile != "" {
		if err := s.load(); err != nil {
			return nil, err
		}
	}
	if cfg.WebhookURL != "" {
		header := headerSignature
		if cfg.API == APIStripe {
			header = headerStripeSignature
		}
		s.hooks = newWebhookSender(cfg.WebhookURL, cfg.WebhookSecret, header, s.log, s.now, func() { s.webhooksSent.Add(1) })
	}
	s.handler = s.routes()
	s.log.Info("simulator ready",
		"state_file", cfg.StateFile,
		"webhook_url", cfg.redactedWebhookURL(),
		"latency", cfg.Latency.String(),
		"auth_ttl", cfg.AuthTTL.String(),
		"charges", len(s.st.charges),
		"refunds", len(s.st.refunds))
	return s, nil
}

// Handler serves the provider API (/v1/*) and the control API (/_sim/*).
func (s *Server) Handler() http.Handler { return s.handler }

// Close stops webhook deliveries (pending retries are abandoned) and flushes
// the state file. It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.hooks != nil {
			s.hooks.close()
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.closeErr = s.persistLocked()
	})
	return s.closeErr
}

// ListenAndServe binds cfg.Addr, logs "listening" with the bound address,
// and serves Handler until ctx ends; then it drains in-flight requests.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	s.log.Info("listening", "addr", ln.Addr().String())
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// A request still sleeping a long fault latency is not worth a failed exit.
		s.log.Warn("in-flight requests abandoned", "err", err)
		_ = srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	if s.cfg.API == APIStripe {
		mux.Handle("/v1/", s.stripeAuth(s.stripeRoutes()))
	} else {
		mux.Handle("/v1/", s.requireAPIKey(s.simRoutes()))
	}
	return s.controlRoutes(mux)
}

// simRoutes is the simulator's own provider API.
func (s *Server) simRoutes() http.Handler {
	v1 := http.NewServeMux()
	v1.HandleFunc("POST /v1/charges", s.handleCreateCharge)
	v1.HandleFunc("GET /v1/charges", s.handleListCharges)
	v1.HandleFunc("GET /v1/charges/{id}", s.handleGetCharge)
	v1.HandleFunc("POST /v1/charges/{id}/capture", s.handleCapture)
	v1.HandleFunc("POST /v1/charges/{id}/void", s.handleVoid)
	v1.HandleFunc("GET /v1/captures", s.handleListCaptures)
	v1.HandleFunc("GET /v1/voids", s.handleListVoids)
	v1.HandleFunc("POST /v1/refunds", s.handleCreateRefund)
	v1.HandleFunc("GET /v1/refunds", s.handleListRefunds)
	v1.HandleFunc("GET /v1/refunds/{id}", s.handleGetRefund)
	return v1
}

// controlRoutes adds the control API (/_sim/*) to mux.
func (s *Server) controlRoutes(mux *http.ServeMux) http.Handler {
	mux.HandleFunc("GET /_sim/charges", s.handleSimCharges)
	mux.HandleFunc("POST /_sim/charges", s.handleSimImport)
	mux.HandleFunc("POST /_sim/charges/{id}/expire", s.handleSimExpire)
	mux.HandleFunc("GET /_sim/refunds", s.handleSimRefunds)
	mux.HandleFunc("GET /_sim/stats", s.handleSimStats)
	mux.HandleFunc("GET /_sim/faults", s.handleGetFaults)
	mux.HandleFunc("PUT /_sim/faults", s.handlePutFaults)
	mux.HandleFunc("DELETE /_sim/faults", s.handleDeleteFaults)
	return mux
}

// requireAPIKey answers 401 unless the request carries "Authorization: Bearer <APIKey>".
func (s *Server) requireAPIKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.validAPIKey(r) {
			writeError(w, s.log, errorf(codeUnauthorized, "missing or invalid API key"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
