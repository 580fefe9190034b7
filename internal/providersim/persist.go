package providersim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// snapshotVersion is bumped when the state file's shape changes incompatibly.
// Partial refunds only added fields (a charge's amount_refunded, a refund's
// currency and reference, a refund key's request, stats.refund_calls), and
// so did captures (a charge's captured amounts and keys, the captures and
// voids with their keys, stats.capture_calls and void_calls); load fills
// them in for a file written before them, so it is still 1.
const snapshotVersion = 1

// snapshot is the state file's JSON shape.
type snapshot struct {
	Version    int                     `json:"version"`
	Charges    []Charge                `json:"charges"`
	Refunds    []Refund                `json:"refunds"`
	ChargeKeys map[string]storedAnswer `json:"charge_keys"`
	RefundKeys map[string]storedAnswer `json:"refund_keys"`
	Captures   map[string]heldRecord   `json:"captures,omitempty"`
	Voids      map[string]heldRecord   `json:"voids,omitempty"`
	StripeKeys map[string]stripeKey    `json:"stripe_keys,omitempty"`
	Stats      Stats                   `json:"stats"`
}

// heldRecord is a capture or void as the state file keeps it: the record
// and the answer stored under its key.
type heldRecord struct {
	Capture
	Answer storedAnswer `json:"answer"`
}

// load reads the state file; a missing file is an empty state.
func (s *Server) load() error {
	b, err := os.ReadFile(s.cfg.StateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read state file: %w", err)
	}
	var snap snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return fmt.Errorf("state file %s: %w", s.cfg.StateFile, err)
	}
	if snap.Version != snapshotVersion {
		return fmt.Errorf("state file %s: version %d, want %d", s.cfg.StateFile, snap.Version, snapshotVersion)
	}
	st := newState()
	for i := range snap.Charges {
		ch := &snap.Charges[i]
		if err := ch.normalizeRefunds(); err != nil {
			return fmt.Errorf("state file %s: %w", s.cfg.StateFile, err)
		}
		st.addCharge(ch)
	}
	for i := range snap.Refunds {
		re := &snap.Refunds[i]
		ch, ok := st.charges[re.Charge]
		if !ok {
			return fmt.Errorf("state file %s: refund %s names unknown charge %s", s.cfg.StateFile, re.ID, re.Charge)
		}
		if re.Currency == "" { // written before refunds carried it
			re.Currency = ch.Currency
		}
		st.refunds[re.ID] = re
	}
	for k, a := range snap.ChargeKeys {
		if _, ok := st.charges[a.ID]; !ok {
			return fmt.Errorf("state file %s: key %q names unknown charge %s", s.cfg.StateFile, k, a.ID)
		}
		st.chargeKeys[k] = &a
	}
	for k, a := range snap.RefundKeys {
		re, ok := st.refunds[a.ID]
		if !ok {
			return fmt.Errorf("state file %s: key %q names unknown refund %s", s.cfg.StateFile, k, a.ID)
		}
		if a.Request == nil {
			// Written when a refund request was only {"charge":C}.
			a.Request = &opRequest{Charge: re.Charge}
		}
		st.refundKeys[k] = &a
	}
	for _, held := range []struct {
		from    map[string]heldRecord
		records map[string]*Capture
		keys    map[string]*storedAnswer
	}{{snap.Captures, st.captures, st.captureKeys}, {snap.Voids, st.voids, st.voidKeys}} {
		for k, h := range held.from {
			if _, ok := st.charges[h.Charge]; !ok {
				return fmt.Errorf("state file %s: key %q names unknown charge %s", s.cfg.StateFile, k, h.Charge)
			}
			rec, ans := h.Capture, h.Answer
			held.records[k], held.keys[k] = &rec, &ans
		}
	}
	for k, a := range snap.StripeKeys {
		st.stripeKeys[k] = &a
	}
	s.st = st
	s.chargeCalls.Store(snap.Stats.ChargeCalls)
	s.refundCalls.Store(snap.Stats.RefundCalls)
	s.captureCalls.Store(snap.Stats.CaptureCalls)
	s.voidCalls.Store(snap.Stats.VoidCalls)
	s.webhooksSent.Store(snap.Stats.WebhooksSent)
	return nil
}

// persistLocked writes the whole state to the state file, if there is one.
// Callers hold s.mu, so writes are serialised and never reorder.
func (s *Server) persistLocked() error {
	if s.cfg.StateFile == "" {
		return nil
	}
	snap := snapshot{
		Version:    snapshotVersion,
		Charges:    s.st.sortedCharges(nil, 0),
		Refunds:    s.st.sortedRefunds(nil),
		ChargeKeys: make(map[string]storedAnswer, len(s.st.chargeKeys)),
		RefundKeys: make(map[string]storedAnswer, len(s.st.refundKeys)),
		Stats:      s.statsLocked(),
	}
	for k, a := range s.st.chargeKeys {
		snap.ChargeKeys[k] = *a
	}
	for k, a := range s.st.refundKeys {
		snap.RefundKeys[k] = *a
	}
	snap.Captures = heldRecords(s.st.captures, s.st.captureKeys)
	snap.Voids = heldRecords(s.st.voids, s.st.voidKeys)
	for k, a := range s.st.stripeKeys {
		if !a.running {
			if snap.StripeKeys == nil {
				snap.StripeKeys = map[string]stripeKey{}
			}
			snap.StripeKeys[k] = *a
		}
	}
	b, err := json.Marshal(snap)
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	return writeFileAtomic(s.cfg.StateFile, b)
}

// writeFileAtomic replaces path with data so that a crash leaves either the
// old or the new file, never a torn one: temp file in the same directory,
// fsync, rename, fsync the directory.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("state temp file: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once the rename succeeded
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write state: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync state: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename state: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		// Best effort: makes the rename itself durable on filesystems that need it.
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// heldRecords pairs each capture or void with the answer under its key.
func heldRecords(records map[string]*Capture, answers map[string]*storedAnswer) map[string]heldRecord {
	out := make(map[string]heldRecord, len(records))
	for k, rec := range records {
		out[k] = heldRecord{Capture: *rec, Answer: *answers[k]}
	}
	return out
}
