package outbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// MinDuplicateWindow is the shortest JetStream duplicate window the relay
// accepts: a republish after a crash between PubAck and marking happens
// within one BatchTimeout plus a backoff, well inside it.
const MinDuplicateWindow = 2 * time.Minute

// EnsureStream creates the stream PAYMENTS on payments.> if it is
// missing; see ensureStream for what it does to an existing one.
func EnsureStream(ctx context.Context, js jetstream.JetStream) error {
	return ensureStream(ctx, js, DefaultStream, []string{DefaultStreamSubjects}, Config{}.subjects())
}

// ensureStream creates stream name on subjects (file storage, duplicate
// window MinDuplicateWindow) if it is missing. An existing stream keeps the
// configuration operators gave it (replicas, limits, …), which
// CreateOrUpdateStream would reset on every pod start; it is only widened
// where the relay depends on it: a subject that takes publish, and a
// duplicate window of at least MinDuplicateWindow.
func ensureStream(ctx context.Context, js jetstream.JetStream, name string, subjects []string, publish []string) error {
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:       name,
		Subjects:   subjects,
		Storage:    jetstream.FileStorage,
		Duplicates: MinDuplicateWindow,
	})
	if err == nil {
		return nil // created, or existed with exactly this configuration
	}
	if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return fmt.Errorf("create stream %s: %w", name, err)
	}
	s, err := js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("stream %s: %w", name, err)
	}
	cfg := s.CachedInfo().Config
	changed := false
	for _, p := range publish {
		if !slices.ContainsFunc(cfg.Subjects, func(f string) bool { return subjectMatches(f, p) }) {
			cfg.Subjects = append(cfg.Subjects, subjects...)
			changed = true
			break
		}
	}
	if cfg.Duplicates < MinDuplicateWindow {
		cfg.Duplicates = MinDuplicateWindow
		changed = true
	}
	if !changed {
		return nil
	}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("update stream %s: %w", name, err)
	}
	return nil
}

// subjectMatches reports whether NATS subject filter (which may hold * and
// > wildcards) matches the literal subject.
func subjectMatches(filter, subject string) bool {
	ft := strings.Split(filter, ".")
	st := strings.Split(subject, ".")
	for i, f := range ft {
		if f == ">" {
			return len(st) > i
		}
		if i >= len(st) || (f != "*" && f != st[i]) {
			return false
		}
	}
	return len(ft) == len(st)
}

// validSubject reports whether s is a NATS subject: non-empty tokens without
// whitespace; wildcards only as whole tokens, > only last, and only if
// wildcards are allowed.
func validSubject(s string, wildcards bool) bool {
	if s == "" {
		return false
	}
	tokens := strings.Split(s, ".")
	for i, t := range tokens {
		switch {
		case t == "" || strings.ContainsAny(t, " \t\r\n"):
			return false
		case t == "*" || t == ">":
			if !wildcards || (t == ">" && i != len(tokens)-1) {
				return false
			}
		case strings.ContainsAny(t, "*>"):
			return false
		}
	}
	return true
}
