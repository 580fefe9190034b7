package attempts

import "github.com/acme/paymentsvc/internal/lifecycle"

// The state machine is lifecycle's, shared with refunds; these names let the
// payment code say attempts.Succeeded.

// Status is the state of a payment attempt.
type Status = lifecycle.Status

// Source names who caused a transition, as recorded in the audit table.
type Source = lifecycle.Source

// The statuses, sources and failure codes of lifecycle.
const (
	Created    = lifecycle.Created
	Pending    = lifecycle.Pending
	Succeeded  = lifecycle.Succeeded
	Failed     = lifecycle.Failed
	Unknown    = lifecycle.Unknown
	Authorized = lifecycle.Authorized
	Canceled   = lifecycle.Canceled

	SourceAPI        = lifecycle.SourceAPI
	SourceWebhook    = lifecycle.SourceWebhook
	SourceReconciler = lifecycle.SourceReconciler

	FailureAbandoned        = lifecycle.FailureAbandoned
	FailureProviderNoRecord = lifecycle.FailureProviderNoRecord
)

// CanTransition reports whether from → to is an edge of an automatic
// payment's state machine (Attempt.Machine for any payment's).
func CanTransition(from, to Status) bool { return lifecycle.CanTransition(from, to) }

// LegalPath reports whether an automatic payment's audit trail follows the
// state machine's edges (Attempt.Machine().LegalPath for any payment's).
func LegalPath(path []Status) bool { return lifecycle.LegalPath(path) }
