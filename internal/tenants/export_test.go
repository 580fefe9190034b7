package tenants

import "time"

// SetClock makes the cache read the time from now.
func (c *Cache) SetClock(now func() time.Time) { c.now = now }

// Sweeps is how many times the cache has looked through all its answers for
// expired ones.
func (c *Cache) Sweeps() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sweeps
}

// Len is the number of answers kept (known and unknown keys).
func (c *Cache) Len() (known, unknown int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.known), len(c.unknown)
}
