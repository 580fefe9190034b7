package idempotency

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"sync"
	"time"
)

// DefaultReplayCacheBytes is REPLAY_CACHE_BYTES's default.
const DefaultReplayCacheBytes = 8 << 20

// ReplayCache keeps, in one pod, the final answers of completed keys
// (tenant, key → fingerprint, status, body) so that a replay is answered
// without the database. Only a final answer is kept, and a key's final
// answer never changes once stored (every statement that stores one
// requires response_code IS NULL), so what it holds is what the database
// would answer, as long as the key exists: an entry is never served at or
// past the key's expiry (after which reconciler gc may delete the key), the
// expiry being the database's, counted from before the read that saw it.
// It is bounded by size (the bytes of its entries, approximately), evicting
// the least recently used. A nil *ReplayCache is off: it holds nothing.
type ReplayCache struct {
	max int64
	now func() time.Time

	mu    sync.Mutex
	size  int64
	items map[cacheKey]*list.Element // of *cached
	lru   list.List                  // front: most recently used
}

type cacheKey struct{ tenantID, key string }

type cached struct {
	k       cacheKey
	fp      []byte
	body    BodySum // a raw body Answer matched to fp, if hasBody
	hasBody bool
	res     Result // Outcome Replay
	expires time.Time
	size    int64
}

// entryOverhead approximates an entry's bookkeeping bytes besides its
// strings and slices (the map slot, the list element, the struct).
const entryOverhead = 256

// NewReplayCache returns a cache of at most maxBytes; nil (off) when
// maxBytes ≤ 0.
func NewReplayCache(maxBytes int64) *ReplayCache {
	if maxBytes <= 0 {
		return nil
	}
	return &ReplayCache{max: maxBytes, now: time.Now, items: map[cacheKey]*list.Element{}}
}

// BodySum is the SHA-256 of a request's raw body, as sent.
type BodySum [sha256.Size]byte

// SumBody returns body's BodySum.
func SumBody(body []byte) BodySum { return sha256.Sum256(body) }

// Answer is what the cache answers a request with fingerprint fp on
// (tenantID, key): the stored final answer (Replay), or Mismatch for a key
// used for another request. ok is false on a miss: the database decides.
// The answer's ResponseBody is shared: it must not be modified. On a
// Replay, body (if not nil: the sum of the request's raw body) is kept
// with the entry, for AnswerBody.
func (c *ReplayCache) Answer(tenantID, key string, fp []byte, body *BodySum) (res Result, ok bool) {
	e, ok := c.live(tenantID, key, func(e *cached) {
		if body != nil && bytes.Equal(e.fp, fp) {
			e.body, e.hasBody = *body, true
		}
	})
	if !ok {
		return Result{}, false
	}
	if !bytes.Equal(e.fp, fp) {
		return Result{Outcome: Mismatch}, true
	}
	return e.res, true
}

// AnswerBody is Answer for a request whose raw body is, byte for byte, the
// last one Answer replayed on (tenantID, key): the stored answer, with no
// need to decode the body or compute its fingerprint (the same bytes have
// the same fingerprint, and were valid). ok is false otherwise, and the
// caller decodes the body and asks Answer.
func (c *ReplayCache) AnswerBody(tenantID, key string, body BodySum) (res Result, ok bool) {
	same := false
	e, ok := c.live(tenantID, key, func(e *cached) { same = e.hasBody && e.body == body })
	if !ok || !same {
		return Result{}, false
	}
	return e.res, true
}

// live is the unexpired entry of (tenantID, key), made the most recently
// used, after update (if not nil) ran on it under the lock; it drops an
// expired one. Only body changes once an entry is stored, under the lock;
// the other fields may be read without it.
func (c *ReplayCache) live(tenantID, key string, update func(*cached)) (*cached, bool) {
	if c == nil {
		return nil, false
	}
	k := cacheKey{tenantID, key}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, found := c.items[k]
	if !found {
		return nil, false
	}
	e := el.Value.(*cached)
	if !c.now().Before(e.expires) {
		c.remove(el)
		return nil, false
	}
	c.lru.MoveToFront(el)
	if update != nil {
		update(e)
	}
	return e, true
}

// Remember keeps the key pk read, if it holds a final answer, until its
// expiry as the read saw it, counted from sent (taken before the read was
// sent, so never later than the database's expiry).
func (c *ReplayCache) Remember(pk *Peek, sent time.Time) {
	if c == nil || !pk.found || pk.row.ResponseCode == nil || pk.row.ExpiresInMs <= 0 {
		return
	}
	row := pk.row
	e := &cached{
		k:  cacheKey{row.TenantID, row.Key},
		fp: bytes.Clone(row.Fingerprint),
		res: Result{
			Outcome: Replay, ResponseCode: int(*row.ResponseCode), ResponseBody: bytes.Clone(row.ResponseBody),
			AttemptID: deref(row.AttemptID), RefundID: deref(row.RefundID), CaptureID: deref(row.CaptureID),
		},
		expires: sent.Add(time.Duration(row.ExpiresInMs) * time.Millisecond),
	}
	e.size = int64(entryOverhead + sha256.Size + 2*(len(e.k.tenantID)+len(e.k.key)) + len(e.fp) + len(e.res.ResponseBody) +
		len(e.res.AttemptID) + len(e.res.RefundID) + len(e.res.CaptureID))
	if e.size > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, found := c.items[e.k]; found {
		c.remove(old)
	}
	c.items[e.k] = c.lru.PushFront(e)
	c.size += e.size
	for c.size > c.max {
		c.remove(c.lru.Back())
	}
}

// Len and Bytes are the cache's entries and their approximate size.
func (c *ReplayCache) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

// Bytes is the approximate size of the entries (at most the bound).
func (c *ReplayCache) Bytes() int64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}

// remove drops el; c.mu is held.
func (c *ReplayCache) remove(el *list.Element) {
	e := c.lru.Remove(el).(*cached)
	delete(c.items, e.k)
	c.size -= e.size
}
