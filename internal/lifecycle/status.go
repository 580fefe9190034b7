// Package lifecycle is the state machine that payments and refunds share:
// the statuses, the legal edges between them, and who may cause a
// transition. It holds no SQL; internal/attempts and internal/refunds apply
// it to their tables.
//
//	CREATED ──▶ PENDING ──▶ SUCCEEDED
//	   ▲  │        │    ├─▶ FAILED
//	   │  │        │    └─▶ UNKNOWN ──▶ SUCCEEDED | FAILED
//	   │  └─▶ FAILED (abandoned: never reached the provider)
//	   └──────── PENDING (not_sent: no call of the request reached a provider)
//
// CREATED: recorded, the provider not called. PENDING: committed before the
// first provider call. UNKNOWN: the provider may or may not have acted
// (timeout, 5xx, lost response); never guessed to be FAILED. SUCCEEDED and
// FAILED are final.
package lifecycle

import "time"

// Status is the state of a payment or refund.
type Status string

// The statuses of the state machine.
const (
	Created   Status = "CREATED"
	Pending   Status = "PENDING"
	Succeeded Status = "SUCCEEDED"
	Failed    Status = "FAILED"
	Unknown   Status = "UNKNOWN"
)

// Source names who caused a transition, as recorded in the audit table.
type Source string

// The sources of transitions.
const (
	SourceAPI        Source = "api"
	SourceWebhook    Source = "webhook"
	SourceReconciler Source = "reconciler"
	// SourceConsole is a change an operator made in the console; its
	// reason names the operator (ByOperator).
	SourceConsole Source = "console"
)

// Failure codes this service sets itself (declines carry the provider's code).
const (
	FailureAbandoned        = "abandoned"
	FailureProviderNoRecord = "provider_no_record"
)

// ReasonNotSent is the audit reason of PENDING → CREATED.
const ReasonNotSent = "not_sent"

// edges lists, for each status, the statuses it may move to.
var edges = map[Status][]Status{
	Created: {Pending, Failed},
	// PENDING → CREATED only when no call of the request that committed
	// PENDING can have reached a provider (ReasonNotSent).
	Pending: {Succeeded, Failed, Unknown, Created},
	Unknown: {Succeeded, Failed},
}

// Final reports whether no transition leaves s.
func (s Status) Final() bool { return s == Succeeded || s == Failed }

// Valid reports whether s is one of the statuses.
func (s Status) Valid() bool {
	switch s {
	case Created, Pending, Succeeded, Failed, Unknown:
		return true
	}
	return false
}

// CanTransition reports whether from → to is an edge of the state machine.
func CanTransition(from, to Status) bool {
	for _, s := range edges[from] {
		if s == to {
			return true
		}
	}
	return false
}

// LegalPath reports whether the sequence of statuses, starting at CREATED,
// follows the state machine's edges. Tests use it on audit trails.
func LegalPath(path []Status) bool {
	if len(path) == 0 || path[0] != Created {
		return false
	}
	for i := 1; i < len(path); i++ {
		if !CanTransition(path[i-1], path[i]) {
			return false
		}
	}
	return true
}

// Claim is an unresolved payment or refund a reconciler holds the lease of.
type Claim struct {
	ID          string
	Status      Status
	CheckCount  int
	NeedsReview bool
}

// Audit is one audit row of a payment's or a refund's transitions, as the
// console's timeline shows it.
type Audit struct {
	SubjectID string // the payment's or the refund's id
	From      Status // "" for the creation
	To        Status
	Source    Source
	Reason    string
	Provider  string // the provider the subject was at after it, "" if none
	At        time.Time
}

// ReasonCalling starts the reason of every → PENDING: "calling provider
// <name>"; the console reads a payment's provider hops from it.
const ReasonCalling = "calling provider "

// ByOperator is reason as a change made in the console by the operator
// with email records it: the audit row names who made it.
func ByOperator(reason, email string) string {
	if email == "" {
		return reason
	}
	return reason + "; by operator " + email
}
