//go:build !linux

package db

import "time"

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist: the
// keepalive probes alone find a silent connection.
func setUserTimeout(uintptr, time.Duration) error { return nil }
