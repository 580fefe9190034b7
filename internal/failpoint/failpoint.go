// Package failpoint makes the process die on the spot at a named point, for
// crash tests. PAYMENTSVC_FAILPOINT=NAME arms one point; unset, Hit is a
// comparison against an empty string and does nothing.
package failpoint

import (
	"os"
	"sync/atomic"
)

// The failpoints of the create path and of the refund, capture and void
// paths (docs/configuration.md, "Failpoints").
const (
	AfterKeyAcquired     = "after_key_acquired"
	AfterProviderCall    = "after_provider_call"
	BeforeCompleteCommit = "before_complete_commit"

	RefundAfterKeyAcquired     = "refund_after_key_acquired"
	RefundAfterProviderCall    = "refund_after_provider_call"
	RefundBeforeCompleteCommit = "refund_before_complete_commit"

	CaptureAfterKeyAcquired     = "capture_after_key_acquired"
	CaptureAfterProviderCall    = "capture_after_provider_call"
	CaptureBeforeCompleteCommit = "capture_before_complete_commit"

	VoidAfterKeyAcquired     = "void_after_key_acquired"
	VoidAfterProviderCall    = "void_after_provider_call"
	VoidBeforeCompleteCommit = "void_before_complete_commit"
)

var (
	armed string
	fired atomic.Bool
)

// Arm sets the failpoint to trigger; main calls it once with the
// environment's value, before serving.
func Arm(name string) { armed = name }

// Armed reports whether name is the armed point. A path that has a faster
// variant without that point (the create path's one-round-trip
// transactions) takes the variant that has it, so that a crash test crashes
// where it says.
func Armed(name string) bool { return armed != "" && armed == name }

// Hit exits the process with status 137, writing nothing and cleaning up
// nothing, the first time the armed point is reached.
func Hit(name string) {
	if armed == "" || armed != name {
		return
	}
	if fired.CompareAndSwap(false, true) {
		os.Exit(137)
	}
}
