package outbox

import (
	"math/rand/v2"
	"time"
)

// backoff returns the wait before try number failures+1: exponential from
// lo, capped at hi, with "equal jitter" (half fixed, half random) so relays
// and rows that failed together do not retry in lockstep, yet never retry
// sooner than half the nominal wait.
func backoff(failures int, lo, hi time.Duration) time.Duration {
	d := lo
	for i := 1; i < failures && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	half := d / 2
	return half + rand.N(d-half+1)
}

// jitter returns d ±10%, to spread the polls of relays started together.
func jitter(d time.Duration) time.Duration {
	spread := d / 5
	if spread <= 0 {
		return d
	}
	return d - spread/2 + rand.N(spread+1)
}
