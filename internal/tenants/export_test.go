package tenants

import "time"

// SetClock makes the cache read the time from now.
func (c *Cache) SetClock(now func() time.Time) { c.now = now }
