package delivery

import (
	"fmt"
	"strings"
	"time"
)

// DefaultSchedule is the wait before each retry of a delivery
// (MERCHANT_WEBHOOK_RETRY_SCHEDULE): eight attempts over about 28 hours.
var DefaultSchedule = []time.Duration{
	5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour,
}

// Bounds of a schedule.
const (
	MaxScheduleLen   = 20
	MaxScheduleDelay = 7 * 24 * time.Hour
)

// ParseSchedule reads a comma-separated list of delays ("5s,5m,30m"), each
// a positive Go duration of at most MaxScheduleDelay.
func ParseSchedule(s string) ([]time.Duration, error) {
	parts := strings.Split(s, ",")
	if len(parts) > MaxScheduleLen {
		return nil, fmt.Errorf("at most %d delays, not %d", MaxScheduleLen, len(parts))
	}
	out := make([]time.Duration, 0, len(parts))
	for _, p := range parts {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("%q is not a duration (like 5s, 30m, 2h)", strings.TrimSpace(p))
		}
		if d <= 0 || d > MaxScheduleDelay {
			return nil, fmt.Errorf("%s is not between 0 and %s", d, MaxScheduleDelay)
		}
		out = append(out, d)
	}
	return out, nil
}

// FormatSchedule is the schedule as ParseSchedule reads it, each delay
// without its zero minutes and seconds (2h, not 2h0m0s).
func FormatSchedule(s []time.Duration) string {
	parts := make([]string, len(s))
	for i, d := range s {
		p := d.String()
		if strings.HasSuffix(p, "m0s") {
			p = p[:len(p)-2]
		}
		if strings.HasSuffix(p, "h0m") {
			p = p[:len(p)-2]
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}
