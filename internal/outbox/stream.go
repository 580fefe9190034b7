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
// accepts. JetStream drops a message whose Nats-Msg-Id it stored less than a
// window ago, and the relay resends a row with the same id whenever it is
// not sure the row was stored: after a crash between PubAck and marking, and
// after a publish whose PubAck did not come in time (a stream leader that
// died, a broker failing over), which may well have been stored. Successive
// tries of a row are at most PublishTimeout + BackoffMax + PollInterval
// apart (about 71 s with the defaults), so with 10 minutes every retry of a
// stored message is dropped unless the broker stays unreachable for more
// than about 8 minutes; after a longer outage consumers' dedupe by event id
// (which they need anyway) is what catches the copy.
const MinDuplicateWindow = 10 * time.Minute

// Replica bounds of a stream the relay creates (JetStream allows 1 to 5).
const (
	DefaultStreamReplicas = 1
	MaxStreamReplicas     = 5
)

// ensureStream creates stream name on subjects (file storage, replicas
// copies, duplicate window MinDuplicateWindow) if it is missing. An existing
// stream keeps the configuration operators gave it (replicas, limits, …),
// which CreateOrUpdateStream would reset on every pod start; it is only
// widened where the relay depends on it: subjects that take every subject of
// publish (subjects themselves, or, where they would overlap the stream's
// own, which JetStream refuses, the missing subjects of publish), and a
// duplicate window of at least MinDuplicateWindow (or the stream's MaxAge,
// if shorter: JetStream refuses a window longer than that).
func ensureStream(ctx context.Context, js jetstream.JetStream, name string, subjects []string, publish []string, replicas int) error {
	// Looked up first: creating it again with other settings can fail for
	// those settings (replicas a single server cannot have) rather than
	// report that it exists.
	s, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{
			Name:       name,
			Subjects:   subjects,
			Storage:    jetstream.FileStorage,
			Duplicates: MinDuplicateWindow,
			Replicas:   replicas,
		})
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return fmt.Errorf("create stream %s: %w", name, err)
		}
		s, err = js.Stream(ctx, name) // another relay created it meanwhile
	}
	if err != nil {
		return fmt.Errorf("stream %s: %w", name, err)
	}
	cfg := s.CachedInfo().Config
	changed := false
	var missing []string // publish subjects the stream does not take
	for _, p := range publish {
		if !slices.ContainsFunc(cfg.Subjects, func(f string) bool { return subjectMatches(f, p) }) {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		// JetStream refuses subjects of one stream that overlap: subjects
		// (payments.>) cannot join a stream on payments.succeeded, say, and
		// then only the missing subjects themselves are added.
		overlaps := slices.ContainsFunc(subjects, func(n string) bool {
			return slices.ContainsFunc(cfg.Subjects, func(f string) bool { return subjectsCollide(n, f) })
		})
		if overlaps {
			cfg.Subjects = append(cfg.Subjects, missing...)
		} else {
			cfg.Subjects = append(cfg.Subjects, subjects...)
		}
		changed = true
	}
	window := MinDuplicateWindow
	if cfg.MaxAge > 0 && cfg.MaxAge < window {
		window = cfg.MaxAge
	}
	if cfg.Duplicates < window {
		cfg.Duplicates = window
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

// subjectsCollide reports whether some literal subject matches both NATS
// subject filters a and b.
func subjectsCollide(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; ; i++ {
		if i >= len(at) || i >= len(bt) {
			return len(at) == len(bt)
		}
		if at[i] == ">" || bt[i] == ">" {
			return true // the other has a token here, and > takes the rest
		}
		if at[i] != "*" && bt[i] != "*" && at[i] != bt[i] {
			return false
		}
	}
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
