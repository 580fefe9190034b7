// Package webhook receives the payment providers' webhooks
// (POST /v1/webhooks/{provider}, one path per configured provider; an
// unknown name is 404): it verifies each delivery, records it once, and
// applies it to the payment attempt (through attempts.Update) or to the
// refund (through refunds.Update) it is about.
//
// # Verification
//
// The provider signs every delivery with the header
//
//	Sim-Signature: t=UNIX,v1=HEX
//
// where HEX is the lower-case hex HMAC-SHA256 of "UNIX.BODY" under a shared
// secret. Signing the timestamp with the body lets us refuse replays: a
// signature more than Tolerance (300s) away from our clock, either side, is
// stale. The header may carry several v1 values and we may accept several
// secrets (during a rotation): each provider's are WEBHOOK_SECRETS_<NAME>
// when that is set, else WEBHOOK_SECRETS. Every v1 is compared against
// the HMAC under every secret with hmac.Equal, which takes the same time
// wherever the bytes differ, so response timing does not reveal how much of
// a forged signature was right. Unknown schemes in the header are ignored.
// Verification comes before parsing: a request that is not authentic gets
// 401 and nothing is parsed, stored or applied. Neither secrets nor
// signatures are ever logged.
//
// # Recording and applying
//
// An authentic event is recorded and applied in one transaction. The insert
// into webhook_events (primary key provider + event id, ON CONFLICT DO
// NOTHING; the provider is the one whose path received it, so two providers'
// event ids never collide) is the claim: of several deliveries of one event,
// on any number of pods, exactly one inserts the row; the others wait on the
// unique index until that transaction ends and then insert nothing and answer
// 200 without applying anything. If the first transaction rolls back, the row
// is gone and a later delivery applies the event, so an event is applied
// exactly once, never half.
//
// A charge event's attempt is found by the charge's reference (our payment
// id; for a provider that does not echo the reference, the id in the derived
// key psvc_<payment id>), cross-checked against the provider key the charge
// was made with, else by the charge id we recorded; a refund.succeeded
// event's refund likewise by the refund's reference (our refund id, or the
// one in its derived key) and derived key, else by the provider refund id we
// recorded. Its row is then locked (SELECT … FOR
// UPDATE) and the event judged against the locked status:
//
//   - charge.succeeded, charge.failed or refund.succeeded from a provider
//     other than the one the payment (or refund) is at changes nothing and
//     records a wrong_provider anomaly: a payment leaves a provider only
//     when nothing was ever sent to it, so another provider's word about it
//     cannot be about its charge.
//   - charge.succeeded / charge.failed for a PENDING or UNKNOWN attempt moves
//     it to SUCCEEDED (with the charge id) / FAILED (with the failure code).
//   - refund.succeeded for a PENDING or UNKNOWN refund moves it to
//     SUCCEEDED (with the provider refund id; the payment's amount_refunded
//     grows). A provider refund with no refund of ours behind it records an
//     unexpected_refund anomaly (outcome unknown_refund), except
//     settlement's own refunds of orphan charges, which are expected.
//   - charge.refunded names no refund of ours and never transitions (a
//     refunded payment stays SUCCEEDED): when the payment is at that
//     provider, it only prompts, after the commit, a sync of the payment's
//     unresolved (PENDING, UNKNOWN) refunds with it (Handler.SyncRefund).
//   - charge.authorized makes a PENDING or UNKNOWN manual payment AUTHORIZED
//     (a late one is a no-op). charge.captured and charge.voided resolve
//     our own capture or void (the one the charge's capture_key or void_key
//     names, else the payment's PENDING or UNKNOWN one), which moves the
//     payment with it (holds.go); without one of ours the payment moves all
//     the same (SUCCEEDED with the provider's amount_captured, or CANCELED
//     voided_at_provider) and unexpected_capture or unexpected_void is
//     recorded. charge.expired makes it CANCELED (expired), recording
//     nothing. Settlement's void of an orphan authorization is expected.
//   - A report that agrees with a final status is a no-op.
//   - A report that contradicts a final status, names a charge (or provider
//     refund) other than the one recorded, or concerns an attempt that never
//     reached the provider changes nothing and records a conflicting_report
//     anomaly.
//   - A charge event for a charge with no attempt records an unknown_charge
//     anomaly.
//
// Every contradiction is answered 200: the provider retrying it would not
// make it true. Anomalies are deduplicated by the provider and the event id.
// The outcome (applied, noop, anomaly, unknown_charge, unknown_refund) is
// stored on the event row.
//
// # Why racing the API is safe
//
// A webhook can arrive before the API's completing transaction commits, on
// another pod. Both paths change the attempt only through attempts.Update
// (Transition is an Update decided in advance), in a transaction that holds
// the attempt's row lock, and both check the edge against the status read
// under that lock. The second to take the lock therefore sees the first's
// committed status (SUCCEEDED, say), finds no edge from it, and applies
// nothing: there is exactly one audit row and one outbox row for the
// transition, whichever path wins. Lock order is always event row, then
// attempt row, and nothing here waits on a lock the API path holds while it
// waits on ours, so the two cannot deadlock.
package webhook
