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
