package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Event is a webhook of the payments service (docs/webhooks.md).
type Event struct {
	ID        string          `json:"id"` // also the webhook-id header: the dedupe key
	Type      string          `json:"type"`
	CreatedAt time.Time       `json:"created_at"`
	Data      json.RawMessage `json:"data"` // the payment or the refund, as the API shows it
}

// maxBody bounds what the receiver reads of a request.
const maxBody = 1 << 20

// Receiver verifies each delivery with the official Standard Webhooks
// library and applies each event once, however often it is delivered.
type Receiver struct {
	verifiers []*standardwebhooks.Webhook // one per secret: two while rotating
	seen      *Seen
	apply     func(context.Context, Event) error
	log       *slog.Logger
}

// NewReceiver returns a receiver that accepts deliveries signed with any of
// secrets (whsec_…) and hands each new event to apply.
func NewReceiver(secrets []string, seen *Seen, apply func(context.Context, Event) error, log *slog.Logger) (*Receiver, error) {
	if len(secrets) == 0 {
		return nil, errors.New("no webhook secret")
	}
	r := &Receiver{seen: seen, apply: apply, log: log}
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return nil, err
		}
		r.verifiers = append(r.verifiers, wh)
	}
	return r, nil
}

// ServeHTTP answers 200 once the event is applied (or was before: a
// duplicate), 401 for a signature that does not verify (the timestamp must
// be within 5 minutes of now), 400 for a body that is not an event, and
// 500 when applying failed, so that the service tries again later.
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		http.Error(w, "cannot read the body", http.StatusBadRequest)
		return
	}
	if !rc.verified(body, r.Header) {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" || ev.ID != r.Header.Get("webhook-id") {
		http.Error(w, "not an event", http.StatusBadRequest)
		return
	}
	// Claimed before it is applied, marked done after: a second delivery
	// while the first is being applied is told to come back (409), so the
	// event is applied once and never dropped if the first fails.
	switch rc.seen.Claim(ev.ID) {
	case Done:
		rc.log.Info("duplicate delivery", "webhook_id", ev.ID, "type", ev.Type)
		writeJSON(w, map[string]any{"received": true, "duplicate": true})
		return
	case Busy:
		http.Error(w, "this event is being applied; try again", http.StatusConflict)
		return
	}
	if err := rc.apply(r.Context(), ev); err != nil {
		rc.seen.Release(ev.ID)
		rc.log.Error("apply event", "webhook_id", ev.ID, "err", err)
		http.Error(w, "try again", http.StatusInternalServerError)
		return
	}
	rc.seen.Done(ev.ID)
	rc.log.Info("event applied", "webhook_id", ev.ID, "type", ev.Type)
	writeJSON(w, map[string]any{"received": true})
}

// verified reports whether one of the receiver's secrets signed body (the
// raw bytes, before any parsing).
func (rc *Receiver) verified(body []byte, h http.Header) bool {
	for _, v := range rc.verifiers {
		if v.Verify(body, h) == nil {
			return true
		}
	}
	return false
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Seen remembers the webhook-ids applied in the last TTL. It lives in
// memory, which is enough for an example; a real receiver keeps them in its
// database, inserted with the event's effect in one transaction (see
// examples/consumer), so that a restart forgets nothing.
type Seen struct {
	TTL time.Duration // longer than the service retries for: about 28 h by default

	mu  sync.Mutex
	ids map[string]seenID
}

type seenID struct {
	at   time.Time
	done bool
}

// Claim is what a delivery of event id finds.
type Claim int

// The claims.
const (
	New  Claim = iota // first seen: apply it, then call Done (or Release)
	Busy              // another delivery of it is being applied
	Done              // applied already: a duplicate
)

// Claim records id as being applied, unless it is known already.
func (s *Seen) Claim(id string) Claim {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.ids == nil {
		s.ids = map[string]seenID{}
	}
	for k, e := range s.ids { // a linear sweep: fine for an example's volume
		if e.done && now.Sub(e.at) > s.TTL {
			delete(s.ids, k)
		}
	}
	if e, ok := s.ids[id]; ok {
		if e.done {
			return Done
		}
		return Busy
	}
	s.ids[id] = seenID{at: now}
	return New
}

// Done records that id was applied.
func (s *Seen) Done(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids[id] = seenID{at: time.Now(), done: true}
}

// Release forgets id: its event was not applied after all.
func (s *Seen) Release(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ids, id)
}
