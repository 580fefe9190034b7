// Package lifecycle is the state machine that payments and the operations
// on them (refunds, captures, voids) share: the statuses, the legal edges
// between them, and who may cause a transition. It holds no SQL;
// internal/attempts, internal/refunds and internal/captures apply it to
// their tables.
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
// FAILED are final. This is the machine of an operation (Operation) and of
// a payment charged at once (capture_method automatic).
//
// A payment that is only authorized (capture_method manual, Manual) has two
// statuses more:
//
//	PENDING | UNKNOWN ──▶ AUTHORIZED ──▶ SUCCEEDED (its capture succeeded)
//	                           └───────▶ CANCELED  (its void succeeded, or it expired)
//	PENDING | UNKNOWN ──▶ CANCELED (read back: voided or expired at the provider)
//
// AUTHORIZED: the amount is held at the provider and may be captured or
// voided; not final, but the create's answer for good (Answered). CANCELED
// is final: the authorization was voided or expired, and no money moved.
package lifecycle

import "time"

// Status is the state of a payment or of an operation on it.
type Status string

// The statuses of the state machine.
const (
	Created    Status = "CREATED"
	Pending    Status = "PENDING"
	Succeeded  Status = "SUCCEEDED"
	Failed     Status = "FAILED"
	Unknown    Status = "UNKNOWN"
	Authorized Status = "AUTHORIZED" // manual payments only
	Canceled   Status = "CANCELED"   // manual payments only
)

// Source names who caused a transition, as recorded in the audit table.
type Source string

// The sources of transitions. A source is a short name (the audit tables'
// CHECK lists the ones stored); another front door to the service (an
// operator console) passes its own.
const (
	SourceAPI        Source = "api"
	SourceWebhook    Source = "webhook"
	SourceReconciler Source = "reconciler"
	// SourceConsole is a change an operator made in the console; its
	// reason names the operator (ByOperator, payments.Origin).
	SourceConsole Source = "console"
)

// Failure codes this service sets itself (declines carry the provider's code).
const (
	FailureAbandoned        = "abandoned"
	FailureProviderNoRecord = "provider_no_record"
)

// ReasonNotSent is the audit reason of PENDING → CREATED.
const ReasonNotSent = "not_sent"

// Reasons a manual payment is CANCELED for, besides its void's reason.
const (
	// CanceledExpired: the authorization expired at the provider.
	CanceledExpired = "expired"
	// CanceledAtProvider: the provider voided it without a void of ours.
	CanceledAtProvider = "voided_at_provider"
)

// Machine is a set of legal edges.
type Machine struct{ edges map[Status][]Status }

// operationEdges lists, for each status, the statuses it may move to.
var operationEdges = map[Status][]Status{
	Created: {Pending, Failed},
	// PENDING → CREATED only when no call of the request that committed
	// PENDING can have reached a provider (ReasonNotSent).
	Pending: {Succeeded, Failed, Unknown, Created},
	Unknown: {Succeeded, Failed},
}

// manualEdges are operationEdges and the edges of a held authorization.
var manualEdges = map[Status][]Status{
	Created:    {Pending, Failed},
	Pending:    {Succeeded, Failed, Unknown, Created, Authorized, Canceled},
	Unknown:    {Succeeded, Failed, Authorized, Canceled},
	Authorized: {Succeeded, Canceled},
}

// The machines: Operation for refunds, captures, voids and payments charged
// at once; Manual for payments only authorized at first.
var (
	Operation = Machine{operationEdges}
	Manual    = Machine{manualEdges}
)

// Final reports whether no transition leaves s.
func (s Status) Final() bool { return s == Succeeded || s == Failed || s == Canceled }

// Answered reports whether s answers a create for good: a final status, or
// AUTHORIZED (held, not final, but what the create request achieved; its
// key's response is stored).
func (s Status) Answered() bool { return s.Final() || s == Authorized }

// Valid reports whether s is one of the statuses.
func (s Status) Valid() bool {
	switch s {
	case Created, Pending, Succeeded, Failed, Unknown, Authorized, Canceled:
		return true
	}
	return false
}

// CanTransition reports whether from → to is an edge of m.
func (m Machine) CanTransition(from, to Status) bool {
	for _, s := range m.edges[from] {
		if s == to {
			return true
		}
	}
	return false
}

// LegalPath reports whether the sequence of statuses, starting at CREATED,
// follows m's edges. Tests use it on audit trails.
func (m Machine) LegalPath(path []Status) bool {
	if len(path) == 0 || path[0] != Created {
		return false
	}
	for i := 1; i < len(path); i++ {
		if !m.CanTransition(path[i-1], path[i]) {
			return false
		}
	}
	return true
}

// CanTransition reports whether from → to is an edge of Operation.
func CanTransition(from, to Status) bool { return Operation.CanTransition(from, to) }

// LegalPath is Operation.LegalPath.
func LegalPath(path []Status) bool { return Operation.LegalPath(path) }

// Claim is an unresolved payment or operation a reconciler holds the lease of.
type Claim struct {
	ID          string
	Status      Status
	CheckCount  int
	NeedsReview bool
}

// ClaimsOf is the claims that rows, as a claim query returned them, stand
// for (claim reads one).
func ClaimsOf[T any](rows []T, claim func(T) Claim) []Claim {
	out := make([]Claim, len(rows))
	for i, r := range rows {
		out[i] = claim(r)
	}
	return out
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
