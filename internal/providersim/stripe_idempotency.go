package providersim

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"
)

// headerShouldRetry is Stripe's hint to clients whether a retry can help.
const headerShouldRetry = "Stripe-Should-Retry"

// stripeCommit does the work of a valid POST and returns its answer.
type stripeCommit func() (status int, body []byte, err error)

// stripeKey is what the Stripe face remembers of an Idempotency-Key: the
// request it came with and, once the request ended, its answer (Stripe
// keeps keys about 24 hours; the simulator keeps them as long as its
// state).
type stripeKey struct {
	Endpoint string          `json:"endpoint"` // "POST /v1/payment_intents"
	Params   string          `json:"params"`   // the form, canonically encoded
	Status   int             `json:"status"`
	Body     json.RawMessage `json:"body"`
	Created  int64           `json:"created"`
	running  bool            // the first request has not answered yet
}

// serveStripePost is every POST of the Stripe face, with Stripe's
// idempotency: a request whose Idempotency-Key was seen replays the first
// answer (Idempotent-Replayed: true), a 500 included; with another endpoint
// or other parameters it answers 400 idempotency_error; while the first
// request runs, 409 idempotency_key_in_use. Like Stripe, a request that
// fails validation (prepare's error) stores nothing, and neither does a
// fault answered in front of the API (429, 502, 503, 504); a 500 fault is
// stored, as Stripe stores the 500 of an endpoint that started.
//
// prepare validates the form and returns the commit; key is the
// simulator's own key for the state (the request's Idempotency-Key, or a
// fresh one).
func (s *Server) serveStripePost(w http.ResponseWriter, r *http.Request, faults func() Faults,
	prepare func(key string, form url.Values) (stripeCommit, error)) {
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	if err := r.ParseForm(); err != nil {
		writeStripeError(w, invalidParam("", "The body is not a form-encoded request."))
		return
	}
	form := r.PostForm
	key := r.Header.Get(headerIdempotencyKey)
	simKey := key
	if simKey == "" {
		simKey = newID("nokey_")
	}
	endpoint, params := r.Method+" "+r.URL.Path, form.Encode()
	if key != "" {
		prev, refusal := s.claimStripeKey(key, endpoint, params)
		if refusal != nil {
			writeStripeError(w, refusal)
			return
		}
		if prev != nil {
			// A replay meets the faults too (not stored: the key keeps
			// its first answer).
			f := faults()
			if f.failNow() {
				writeStripeError(w, faultError(f.errorStatus()))
				return
			}
			time.Sleep(f.latency())
			if f.DropAfterCommit {
				s.log.Info("stripe answer dropped by fault", "idempotency_key", key, "endpoint", endpoint)
				dropConnection(w)
				return
			}
			w.Header().Set(headerReplayed, "true")
			writeRaw(w, prev.Status, prev.Body)
			return
		}
	}
	commit, err := prepare(simKey, form)
	if err != nil {
		s.finishStripeKey(key, 0, nil, false)
		s.writeStripeFailure(w, err)
		return
	}
	f := faults()
	if f.failNow() {
		status := f.errorStatus()
		e := faultError(status)
		s.log.Info("stripe call failed by fault", "idempotency_key", key, "endpoint", endpoint, "status", status)
		stored := status == http.StatusInternalServerError
		s.finishStripeKey(key, status, stripeErrorBody(e), stored)
		if stored && key != "" {
			e.shouldRetry = ""
		}
		writeStripeError(w, e)
		return
	}
	// Not tied to r.Context(), as in the simulator's API: a slow provider
	// finishes its work when the caller has hung up.
	time.Sleep(f.latency())
	status, body, err := commit()
	if err != nil {
		var se *stripeErr
		if errors.As(err, &se) {
			s.finishStripeKey(key, 0, nil, false)
			writeStripeError(w, se)
			return
		}
		s.log.Error("internal error", "err", err)
		se = &stripeErr{status: http.StatusInternalServerError, Type: stripeAPIError, Message: "The simulator failed; see its log."}
		status, body = se.status, stripeErrorBody(se)
	}
	s.finishStripeKey(key, status, body, true)
	if f.DropAfterCommit {
		s.log.Info("stripe answer dropped by fault", "idempotency_key", key, "endpoint", endpoint)
		dropConnection(w)
		return
	}
	writeRaw(w, status, body)
}

// claimStripeKey looks key up: the stored answer to replay, a refusal
// (409 while the first request runs, 400 for another request), or neither,
// and then key is claimed as running.
func (s *Server) claimStripeKey(key, endpoint, params string) (*stripeKey, *stripeErr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, ok := s.st.stripeKeys[key]
	switch {
	case ok && prev.running:
		return nil, &stripeErr{status: http.StatusConflict, shouldRetry: "true", Type: stripeIdempotencyError,
			Code: "idempotency_key_in_use", Message: "There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through): " + key + ". Please try again later."}
	case ok && (prev.Endpoint != endpoint || prev.Params != params):
		return nil, &stripeErr{status: http.StatusBadRequest, Type: stripeIdempotencyError, Code: codeIdempotencyError,
			Message: "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '" + key + "' if you meant to execute a different request."}
	case ok:
		c := *prev
		return &c, nil
	}
	s.st.stripeKeys[key] = &stripeKey{Endpoint: endpoint, Params: params, Created: s.now().Unix(), running: true}
	return nil, nil
}

// finishStripeKey stores the answer under key, or forgets key when store
// is false (a request that did not start: it may be sent again).
func (s *Server) finishStripeKey(key string, status int, body []byte, store bool) {
	if key == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.st.stripeKeys[key]
	if !ok {
		return
	}
	if !store {
		delete(s.st.stripeKeys, key)
		return
	}
	k.Status, k.Body, k.running = status, body, false
	if err := s.persistLocked(); err != nil {
		// Kept in memory; the object itself is persisted, and its own key
		// replays it should the answer be lost with the process.
		s.log.Error("persist stripe idempotency key", "err", err)
	}
}

// writeStripeFailure answers a refusal of prepare.
func (s *Server) writeStripeFailure(w http.ResponseWriter, err error) {
	var se *stripeErr
	if !errors.As(err, &se) {
		s.log.Error("internal error", "err", err)
		se = &stripeErr{status: http.StatusInternalServerError, Type: stripeAPIError, Message: "The simulator failed; see its log."}
	}
	writeStripeError(w, se)
}

// faultError is the error_rate fault's answer in Stripe's shape: 429
// rate_limit, else an api_error.
func faultError(status int) *stripeErr {
	if status == http.StatusTooManyRequests {
		return &stripeErr{status: status, Type: stripeInvalidRequestError, Code: "rate_limit",
			Message: "Request rate limit exceeded (simulated: error_rate fault)."}
	}
	e := &stripeErr{status: status, Type: stripeAPIError, Message: "Simulated provider failure (error_rate fault)."}
	if status >= 500 {
		e.shouldRetry = "true"
	}
	return e
}
