package idempotency

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/acme/paymentsvc/internal/db"
)

// done is a Peek of a completed key of tenant ten_1 whose expiry is in ms
// milliseconds.
func done(key string, body []byte, ms int64) *Peek {
	code := int32(201)
	id := "pay_" + key
	return &Peek{found: true, row: db.IdemKeyGetRow{
		TenantID: "ten_1", Key: key, Fingerprint: []byte("fp-" + key), AttemptID: &id,
		ResponseCode: &code, ResponseBody: body, ExpiresInMs: ms,
	}}
}

// clock is a ReplayCache's time, moved by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestCache(max int64) (*ReplayCache, *clock) {
	c := NewReplayCache(max)
	clk := &clock{t: time.Unix(1_000_000, 0)}
	c.now = clk.now
	return c, clk
}

func TestReplayCacheAnswers(t *testing.T) {
	c, clk := newTestCache(1 << 20)
	body := []byte(`{"id":"pay_k"}`)
	c.Remember(done("k", body, 60_000), clk.t)
	res, ok := c.Answer("ten_1", "k", []byte("fp-k"), nil)
	if !ok || res.Outcome != Replay || res.ResponseCode != 201 || !bytes.Equal(res.ResponseBody, body) || res.AttemptID != "pay_k" {
		t.Fatalf("hit: %+v %v", res, ok)
	}
	body[0] = 'X' // the cache holds its own copy
	if res, _ := c.Answer("ten_1", "k", []byte("fp-k"), nil); res.ResponseBody[0] != '{' {
		t.Fatalf("the cached body changed with the caller's: %s", res.ResponseBody)
	}
	if res, ok := c.Answer("ten_1", "k", []byte("other"), nil); !ok || res.Outcome != Mismatch {
		t.Fatalf("another fingerprint: %+v %v, want Mismatch", res, ok)
	}
	if _, ok := c.Answer("ten_2", "k", []byte("fp-k"), nil); ok {
		t.Fatal("another tenant's key of the same name was answered")
	}
	// At the expiry, and after it: gone.
	clk.t = clk.t.Add(60 * time.Second)
	if _, ok := c.Answer("ten_1", "k", []byte("fp-k"), nil); ok || c.Len() != 0 || c.Bytes() != 0 {
		t.Fatalf("served at its expiry (ok %v, len %d, bytes %d)", ok, c.Len(), c.Bytes())
	}
}

func TestReplayCacheKeepsOnlyFinalLiveAnswers(t *testing.T) {
	c, clk := newTestCache(1 << 20)
	locked := done("locked", nil, 60_000)
	locked.row.ResponseCode = nil
	locked.row.Locked = true
	c.Remember(locked, clk.t)
	c.Remember(done("expired", []byte("{}"), 0), clk.t)
	c.Remember(&Peek{}, clk.t) // missing
	if c.Len() != 0 {
		t.Fatalf("kept %d entries of keys without a live final answer", c.Len())
	}
	var off *ReplayCache = NewReplayCache(0)
	off.Remember(done("k", []byte("{}"), 60_000), clk.t)
	if _, ok := off.Answer("ten_1", "k", []byte("fp-k"), nil); ok || off.Len() != 0 {
		t.Fatal("a cache of 0 bytes is off")
	}
}

func TestReplayCacheEvictsLeastRecentlyUsedBySize(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 1000)
	one := done("k0", body, 60_000)
	c, clk := newTestCache(1 << 20)
	c.Remember(one, clk.t)
	size := c.Bytes()
	c, clk = newTestCache(3*size + size/2) // room for three
	for i := range 3 {
		c.Remember(done(fmt.Sprint("k", i), body, 60_000), clk.t)
	}
	c.Answer("ten_1", "k0", []byte("fp-k0"), nil) // k0 used: k1 is the least recent
	c.Remember(done("k3", body, 60_000), clk.t)
	if c.Len() != 3 || c.Bytes() > 3*size+size/2 {
		t.Fatalf("len %d, bytes %d: over the bound", c.Len(), c.Bytes())
	}
	for key, want := range map[string]bool{"k0": true, "k1": false, "k2": true, "k3": true} {
		if _, ok := c.Answer("ten_1", key, []byte("fp-"+key), nil); ok != want {
			t.Fatalf("%s cached: %v, want %v", key, ok, want)
		}
	}
	c.Remember(done("huge", bytes.Repeat([]byte("x"), int(4*size)), 60_000), clk.t)
	if _, ok := c.Answer("ten_1", "huge", []byte("fp-huge"), nil); ok || c.Len() != 3 {
		t.Fatal("an answer larger than the whole cache is not kept (and evicts nothing)")
	}
}

// BenchmarkReplayCacheHit is the hit path: the lookup of a stored answer
// among 10,000, from parallel goroutines. Run: go test -run '^$' -bench
// ReplayCache ./internal/idempotency
func BenchmarkReplayCacheHit(b *testing.B) {
	c := NewReplayCache(DefaultReplayCacheBytes)
	body := bytes.Repeat([]byte("x"), 300)
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprint("key-", i)
		c.Remember(done(keys[i], body, 3_600_000), time.Now())
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			k := keys[i%len(keys)]
			if _, ok := c.Answer("ten_1", k, []byte("fp-"+k), nil); !ok {
				b.Fatal("miss")
			}
			i++
		}
	})
}

// TestReplayCacheAnswersTheSameBytesUndecoded: AnswerBody answers only the
// raw body that Answer last replayed on the same tenant and key (not one
// that Answer found a mismatch for, nor another tenant's), and never past
// the key's expiry.
func TestReplayCacheAnswersTheSameBytesUndecoded(t *testing.T) {
	c, clk := newTestCache(1 << 20)
	c.Remember(done("k", []byte(`{"id":"pay_k"}`), 60_000), clk.t)
	sent, other := SumBody([]byte(`{"amount":500}`)), SumBody([]byte(`{"amount": 500}`))

	if _, ok := c.AnswerBody("ten_1", "k", sent); ok {
		t.Fatal("AnswerBody answered bytes no Answer has replayed")
	}
	if res, ok := c.Answer("ten_1", "k", []byte("another fp"), &other); !ok || res.Outcome != Mismatch {
		t.Fatalf("Answer with another fingerprint = %+v, %v; want Mismatch", res, ok)
	}
	if _, ok := c.AnswerBody("ten_1", "k", other); ok {
		t.Fatal("AnswerBody answered bytes whose fingerprint did not match")
	}
	if res, ok := c.Answer("ten_1", "k", []byte("fp-k"), &sent); !ok || res.Outcome != Replay {
		t.Fatalf("Answer = %+v, %v; want Replay", res, ok)
	}
	res, ok := c.AnswerBody("ten_1", "k", sent)
	if !ok || res.Outcome != Replay || res.ResponseCode != 201 || string(res.ResponseBody) != `{"id":"pay_k"}` || res.AttemptID != "pay_k" {
		t.Fatalf("AnswerBody = %+v, %v; want the stored answer", res, ok)
	}
	for _, miss := range []struct {
		tenant, key string
		sum         BodySum
	}{{"ten_1", "k", other}, {"ten_2", "k", sent}, {"ten_1", "k2", sent}} {
		if _, ok := c.AnswerBody(miss.tenant, miss.key, miss.sum); ok {
			t.Fatalf("AnswerBody(%s, %s, …) answered", miss.tenant, miss.key)
		}
	}
	// A replay of other bytes with the same fingerprint takes the entry's
	// body over: one per key.
	if _, ok := c.Answer("ten_1", "k", []byte("fp-k"), &other); !ok {
		t.Fatal("Answer missed")
	}
	if _, ok := c.AnswerBody("ten_1", "k", sent); ok {
		t.Fatal("AnswerBody answered a body that is no longer the entry's")
	}
	if _, ok := c.AnswerBody("ten_1", "k", other); !ok {
		t.Fatal("AnswerBody missed the entry's body")
	}
	clk.t = clk.t.Add(time.Minute)
	if _, ok := c.AnswerBody("ten_1", "k", other); ok || c.Len() != 0 {
		t.Fatalf("AnswerBody answered at the key's expiry (entries %d)", c.Len())
	}
	var off *ReplayCache
	if _, ok := off.AnswerBody("ten_1", "k", sent); ok {
		t.Fatal("a nil cache answered")
	}
}

// BenchmarkReplayCacheBodyHit is AnswerBody's hit path with the body's sum
// (a 300-byte body) among 10,000 entries, from parallel goroutines.
func BenchmarkReplayCacheBodyHit(b *testing.B) {
	c := NewReplayCache(DefaultReplayCacheBytes)
	resp := bytes.Repeat([]byte("x"), 300)
	req := bytes.Repeat([]byte("y"), 300)
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprint("key-", i)
		c.Remember(done(keys[i], resp, 3_600_000), time.Now())
		sum := SumBody(req)
		c.Answer("ten_1", keys[i], []byte("fp-"+keys[i]), &sum)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, ok := c.AnswerBody("ten_1", keys[i%len(keys)], SumBody(req)); !ok {
				b.Fatal("miss")
			}
			i++
		}
	})
}
