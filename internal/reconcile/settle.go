package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/captures"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/refunds"
	"github.com/acme/paymentsvc/internal/tracing"
)

// DayLayout is the format of a settlement day (--day).
const DayLayout = "2006-01-02"

// Anomaly kinds that settlement records.
const (
	AnomalyOrphanCharge      = "orphan_charge"
	AnomalyAmountMismatch    = "amount_mismatch"
	AnomalyMissingAtProvider = "missing_at_provider"
	AnomalyStatusMismatch    = "status_mismatch"
	// AnomalyOrphanAuthorization: an authorized charge no payment of ours
	// stands for (settlement voids it).
	AnomalyOrphanAuthorization = "orphan_authorization"
)

// RefundKey is the idempotency key of the refund of an orphan charge: derived
// from the charge, so settling a day again never refunds it twice.
func RefundKey(chargeID string) string { return refunds.OrphanKey(chargeID) }

// VoidKey is the idempotency key of the void of an orphan authorization,
// derived from the charge likewise.
func VoidKey(chargeID string) string { return captures.OrphanVoidKey(chargeID) }

// ParseDay parses a settlement day, YYYY-MM-DD, as midnight UTC.
func ParseDay(s string) (time.Time, error) {
	d, err := time.Parse(DayLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("day %q is not YYYY-MM-DD", s)
	}
	return d.UTC(), nil
}

// Report is what one Settle found, printed as the job's JSON line. It
// describes the day as it stands when Settle ends, so settling a day again
// prints the same report (and refunds nothing again).
type Report struct {
	// Day is the settled UTC day.
	Day string `json:"day"`
	// ProviderCharges is the provider's charges created that day.
	ProviderCharges int `json:"provider_charges"`
	// Matched is the charges that agree with their attempt: a succeeded
	// charge that is the SUCCEEDED attempt's charge with the same captured
	// amount and currency, a failed charge of a FAILED attempt, an
	// authorized one of the AUTHORIZED attempt, a voided or expired one of a
	// CANCELED (or FAILED) attempt.
	Matched int `json:"matched"`
	// OrphansRefunded is the succeeded charges (that moved money) with no
	// attempt, or whose attempt is FAILED or CANCELED, that are refunded
	// now: by this run, or earlier.
	OrphansRefunded int `json:"orphans_refunded"`
	// OrphansVoided is the authorized charges with no attempt, or whose
	// attempt is FAILED or CANCELED, that are voided now: by this run, or
	// earlier. An authorized, voided or expired charge moved no money and
	// is never refunded.
	OrphansVoided int `json:"orphans_voided"`
	// AmountMismatches is the charges of SUCCEEDED attempts whose amount or
	// currency differs from the attempt's.
	AmountMismatches int `json:"amount_mismatches"`
	// MissingAtProvider is the attempts created that day and SUCCEEDED
	// whose charge the provider does not have.
	MissingAtProvider int `json:"missing_at_provider"`
	// Foreign is the charges of the day that carry no reference of ours
	// (made by another system on a shared provider account, e.g. a Stripe
	// PaymentIntent without metadata[psvc_payment]): counted in
	// ProviderCharges too, and never touched.
	Foreign int `json:"foreign"`
}

// settleChunk bounds the charges of one provider answer (a page) and the
// attempts of one query.
const settleChunk = 1000

// Settle compares the provider's charges created on day (UTC) with our
// attempts: it counts the matches, refunds orphan charges, and records an
// anomaly for every orphan, mismatch and charge missing at the provider. A
// succeeded charge of an attempt that is not final yet is left to Run. An
// error means the day is not fully settled; settling it again is safe.
func (r *Reconciler) Settle(ctx context.Context, day time.Time) (_ Report, err error) {
	from := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, time.UTC)
	ctx, span := tracing.Start(ctx, "reconciler settle", attribute.String("reconciler.day", from.Format(DayLayout)))
	defer func() { endSpan(span, err) }()
	to := from.AddDate(0, 0, 1)
	rep := Report{Day: from.Format(DayLayout)}
	// Every provider, page by page, so memory holds one page of charges (and
	// the day's charge ids, for findMissing) however busy the day was.
	var (
		st         settleStats
		errs       []error
		dayCharges = map[string]map[string]bool{} // provider → charge ids of the day
	)
	for _, p := range r.providers {
		seen := map[string]bool{}
		dayCharges[p.Name()] = seen
		for after := ""; ; {
			page, err := p.ListCharges(ctx, provider.ListQuery{From: from, To: to, After: after, Limit: settleChunk})
			if err != nil {
				return rep, errors.Join(append(errs, fmt.Errorf("%w: %s: list charges: %w", ErrProviderUnreachable, p.Name(), err))...)
			}
			rep.ProviderCharges += len(page.Data)
			ours := make([]provider.Charge, 0, len(page.Data))
			for _, ch := range page.Data {
				if ch.Foreign {
					rep.Foreign++
					continue
				}
				ours = append(ours, ch)
			}
			if err := r.settleCharges(ctx, p, ours, &rep, &st); err != nil {
				errs = append(errs, err)
			}
			for _, ch := range page.Data {
				seen[ch.ID] = true
			}
			if !page.HasMore || len(page.Data) == 0 {
				break
			}
			after = page.Data[len(page.Data)-1].ID
		}
	}
	if err := r.findMissing(ctx, from, to, dayCharges, &rep); err != nil {
		errs = append(errs, err)
	}
	r.log.Info("settlement done", "report", rep, "refunds_issued", st.refundsIssued, "voids_issued", st.voidsIssued,
		"left_to_run", st.unresolved, "unmatched_failed", st.unmatchedFailed, "errors", len(errs))
	return rep, errors.Join(errs...)
}

// settleStats are counts that only the log reports.
type settleStats struct {
	refundsIssued   int // refunds this run made
	voidsIssued     int // voids this run made
	unresolved      int // charges whose attempt is not final yet
	unmatchedFailed int // failed, voided or expired charges no payment of ours matches
}

func (r *Reconciler) settleCharges(ctx context.Context, p payments.Provider, charges []provider.Charge, rep *Report, st *settleStats) error {
	ids := make([]string, 0, 2*len(charges))
	for _, ch := range charges {
		ids = append(ids, candidateIDs(ch)...)
	}
	rows, err := attempts.ListForSettlement(ctx, r.pool, ids)
	if err != nil {
		return fmt.Errorf("read attempts: %w", err)
	}
	byID := make(map[string]attempts.Settled, len(rows))
	for _, row := range rows {
		byID[row.ID] = row
	}
	var errs []error
	for _, ch := range charges {
		var a *attempts.Settled
		for _, id := range candidateIDs(ch) {
			if found, ok := byID[id]; ok {
				a = &found
				break
			}
		}
		if err := r.settleCharge(ctx, p, ch, a, rep, st); err != nil {
			errs = append(errs, fmt.Errorf("charge %s: %w", ch.ID, err))
		}
	}
	return errors.Join(errs...)
}

// candidateIDs are the attempt ids a charge may belong to: the one in its
// derived idempotency key first (the provider deduplicates by it), then its
// reference.
func candidateIDs(ch provider.Charge) []string {
	var ids []string
	if id, ok := strings.CutPrefix(ch.IdempotencyKey, attempts.ProviderKey("")); ok && id != "" {
		ids = append(ids, id)
	}
	if ch.Reference != "" && (len(ids) == 0 || ids[0] != ch.Reference) {
		ids = append(ids, ch.Reference)
	}
	return ids
}

func (r *Reconciler) settleCharge(ctx context.Context, p payments.Provider, ch provider.Charge, a *attempts.Settled, rep *Report, st *settleStats) error {
	if ch.Status != provider.ChargeSucceeded && ch.Status != provider.ChargeFailed {
		return r.settleHeld(ctx, p, ch, a, rep, st)
	}
	succeeded := ch.MovedMoney()
	if a != nil && a.Provider != p.Name() && succeeded {
		// A succeeded charge at p whose payment is not at p: no payment of
		// ours stands for it, whatever that payment's status.
		return r.refundOrphan(ctx, p, ch, a, rep, st)
	}
	switch {
	case a != nil && a.ChargeID == ch.ID && a.Status == attempts.Succeeded && succeeded:
		if a.AmountCaptured == ch.CapturedAmount() && a.Currency == ch.Currency {
			rep.Matched++
			return nil
		}
		rep.AmountMismatches++
		return r.anomaly(ctx, attempts.Anomaly{
			Kind: AnomalyAmountMismatch, AttemptID: a.ID, ChargeID: ch.ID,
			Detail: map[string]any{
				"attempt_amount": a.Amount, "attempt_amount_captured": a.AmountCaptured, "attempt_currency": a.Currency,
				"charge_amount": ch.Amount, "charge_amount_captured": ch.CapturedAmount(), "charge_currency": ch.Currency,
			},
			DedupeKey: AnomalyAmountMismatch + ":" + ch.ID,
		})
	case a != nil && a.Status == attempts.Failed && !succeeded:
		rep.Matched++
		return nil
	case a != nil && a.ChargeID == ch.ID && a.Status == attempts.Succeeded:
		// Our SUCCEEDED payment's charge is failed at the provider.
		return r.anomaly(ctx, attempts.Anomaly{
			Kind: AnomalyStatusMismatch, AttemptID: a.ID, ChargeID: ch.ID,
			Detail:    map[string]any{"attempt_status": a.Status, "charge_status": ch.Status},
			DedupeKey: AnomalyStatusMismatch + ":" + ch.ID,
		})
	case !succeeded:
		// A failed charge moved no money: nothing to refund.
		st.unmatchedFailed++
		return nil
	case a != nil && !a.Status.Final():
		// Run (or a retry, or a webhook, or for an AUTHORIZED one captured
		// at the provider a sync or its expiry check) will resolve the
		// attempt with it.
		st.unresolved++
		return nil
	case a != nil && a.Status == attempts.Succeeded && a.ChargeID == "":
		// Cannot happen (SUCCEEDED always records its charge); refunding on
		// a broken record could refund a real payment, so a human decides.
		return r.anomaly(ctx, attempts.Anomaly{
			Kind: AnomalyStatusMismatch, AttemptID: a.ID, ChargeID: ch.ID,
			Detail:    map[string]any{"attempt_status": a.Status, "charge_status": ch.Status, "why": "attempt records no charge"},
			DedupeKey: AnomalyStatusMismatch + ":" + ch.ID,
		})
	}
	// A succeeded charge that no payment of ours stands for: no attempt, a
	// FAILED or CANCELED one, or a SUCCEEDED one that holds another charge.
	return r.refundOrphan(ctx, p, ch, a, rep, st)
}

// settleHeld settles an authorized, voided or expired charge: none moved
// money, so none is ever refunded. An authorized one that no payment of
// ours stands for (none, a FAILED or CANCELED one, one at another
// provider, one that holds another charge) is voided under a key derived
// from the charge; one a payment is still resolving is left to Run.
func (r *Reconciler) settleHeld(ctx context.Context, p payments.Provider, ch provider.Charge, a *attempts.Settled, rep *Report, st *settleStats) error {
	ours := a != nil && a.Provider == p.Name() && (a.ChargeID == ch.ID || a.ChargeID == "")
	switch {
	case ch.Status != provider.ChargeAuthorized:
		// Voided or expired: nothing is held.
		switch {
		case ch.VoidKey == VoidKey(ch.ID):
			rep.OrphansVoided++ // voided by an earlier settlement
		case ours && (a.Status == attempts.Canceled || a.Status == attempts.Failed):
			rep.Matched++
		case ours && !a.Status.Final():
			st.unresolved++
		default:
			st.unmatchedFailed++
		}
		return nil
	case ours && a.Status == attempts.Authorized && a.ChargeID == ch.ID:
		rep.Matched++
		return nil
	case ours && !a.Status.Final():
		st.unresolved++
		return nil
	case ours && a.Status == attempts.Succeeded:
		// We hold it captured, the provider holds it authorized: a human
		// decides rather than a void that could undo a real payment.
		return r.anomaly(ctx, attempts.Anomaly{
			Kind: AnomalyStatusMismatch, AttemptID: a.ID, ChargeID: ch.ID,
			Detail:    map[string]any{"attempt_status": a.Status, "charge_status": ch.Status},
			DedupeKey: AnomalyStatusMismatch + ":" + ch.ID,
		})
	}
	return r.voidOrphan(ctx, p, ch, a, rep, st)
}

// voidOrphan voids orphan authorization ch, after recording it.
func (r *Reconciler) voidOrphan(ctx context.Context, p payments.Provider, ch provider.Charge, a *attempts.Settled, rep *Report, st *settleStats) error {
	detail := map[string]any{
		"amount": ch.Amount, "currency": ch.Currency, "reference": ch.Reference,
		"idempotency_key": ch.IdempotencyKey, "void_key": VoidKey(ch.ID), "provider": p.Name(),
	}
	an := attempts.Anomaly{Kind: AnomalyOrphanAuthorization, ChargeID: ch.ID, Detail: detail, DedupeKey: AnomalyOrphanAuthorization + ":" + ch.ID}
	if a != nil {
		an.AttemptID = a.ID
		detail["attempt_status"], detail["attempt_charge_id"], detail["attempt_provider"] = a.Status, a.ChargeID, a.Provider
	}
	if err := r.anomaly(ctx, an); err != nil {
		return err
	}
	log := r.log.With("provider", p.Name(), "charge", ch.ID, "amount", ch.Amount, "currency", ch.Currency, "reference", ch.Reference)
	res := p.VoidCharge(ctx, provider.VoidRequest{ChargeID: ch.ID, IdempotencyKey: VoidKey(ch.ID)})
	switch {
	case res.Outcome == provider.Succeeded:
		rep.OrphansVoided++
		st.voidsIssued++
		log.Warn("orphan authorization voided")
		return nil
	case res.Outcome == provider.Declined && res.DeclineCode != provider.CodeChargeAlreadyCaptured:
		// Voided or expired since the list was read: nothing is held.
		log.Info("orphan authorization no longer held", "code", res.DeclineCode)
		return nil
	case res.Outcome == provider.Declined:
		// Captured since the list was read: money moved, and the next
		// settlement of the day refunds it as an orphan charge.
		log.Warn("orphan authorization captured meanwhile; settle the day again to refund it")
		return nil
	}
	return fmt.Errorf("void orphan authorization: %s: %w", res.Outcome, res.Err)
}

func (r *Reconciler) refundOrphan(ctx context.Context, p payments.Provider, ch provider.Charge, a *attempts.Settled, rep *Report, st *settleStats) error {
	detail := map[string]any{
		"amount": ch.Amount, "currency": ch.Currency, "reference": ch.Reference,
		"idempotency_key": ch.IdempotencyKey, "refund_key": RefundKey(ch.ID),
	}
	an := attempts.Anomaly{Kind: AnomalyOrphanCharge, ChargeID: ch.ID, Detail: detail, DedupeKey: AnomalyOrphanCharge + ":" + ch.ID}
	if a != nil {
		an.AttemptID = a.ID
		detail["attempt_status"] = a.Status
		detail["attempt_charge_id"] = a.ChargeID
		detail["attempt_provider"] = a.Provider
	}
	// Recorded before the refund, so a human sees the orphan even if the
	// refund fails.
	if err := r.anomaly(ctx, an); err != nil {
		return err
	}
	detail["provider"] = p.Name()
	log := r.log.With("provider", p.Name(), "charge", ch.ID, "amount", ch.Amount, "currency", ch.Currency, "reference", ch.Reference)
	if ch.Refunded {
		rep.OrphansRefunded++
		log.Info("orphan charge already refunded")
		return nil
	}
	// The whole rest: an orphan carries no refund made through the API (it
	// has no payment of ours to refund), so whatever is left goes back.
	res := p.CreateRefund(ctx, provider.RefundRequest{ChargeID: ch.ID, IdempotencyKey: RefundKey(ch.ID)})
	switch res.Outcome {
	case provider.Succeeded:
	case provider.Declined:
		if res.DeclineCode == "charge_already_refunded" || res.DeclineCode == "amount_too_large" {
			// Refunded (in full) by someone else since the list was read.
			rep.OrphansRefunded++
			log.Info("orphan charge already refunded", "code", res.DeclineCode)
			return nil
		}
		return fmt.Errorf("refund orphan: refused: %s", res.DeclineCode)
	default:
		return fmt.Errorf("refund orphan: %s: %w", res.Outcome, res.Err)
	}
	re := res.Refund
	rep.OrphansRefunded++
	st.refundsIssued++
	log.Warn("orphan charge refunded", "refund", re.ID)
	return nil
}

// findMissing records the attempts created in [from, to) and SUCCEEDED whose
// charge the provider does not have. A charge absent from the day's list is
// looked up by key before it is called missing: an attempt created just
// before midnight may have its charge created just after. One at a
// provider that is no longer configured cannot be looked up: it is logged
// and skipped, the others are checked, and the error says the day is not
// fully settled.
func (r *Reconciler) findMissing(ctx context.Context, from, to time.Time, dayCharges map[string]map[string]bool, rep *Report) error {
	after, afterID := from.Add(-time.Microsecond), ""
	unchecked := map[string]int{} // provider not configured → its payments skipped
	for {
		rows, err := attempts.ListSucceededCreatedBetween(ctx, r.pool, from, to, after, afterID, settleChunk)
		if err != nil {
			return fmt.Errorf("read succeeded attempts: %w", err)
		}
		for _, row := range rows {
			stored := row.ChargeID
			if stored != "" && dayCharges[row.Provider][stored] {
				continue
			}
			p, err := r.svc.Provider(row.Provider)
			if errors.Is(err, payments.ErrProviderNotConfigured) {
				r.log.Warn("succeeded payment at a provider that is not configured; not checked", "payment_id", row.ID, "provider", row.Provider)
				unchecked[row.Provider]++
				continue
			}
			if err != nil {
				return fmt.Errorf("look up charge of %s: %w", row.ID, err)
			}
			ch, err := p.FindCharge(ctx, provider.Lookup{
				Key: attempts.ProviderKey(row.ID), Reference: row.ID, ChargeID: stored, Since: row.CreatedAt,
			})
			if err != nil && !errors.Is(err, provider.ErrNotFound) {
				return fmt.Errorf("look up charge of %s: %w", row.ID, err)
			}
			if err == nil && ch.ID == stored {
				continue
			}
			rep.MissingAtProvider++
			found := ""
			if err == nil {
				found = ch.ID
			}
			if err := r.anomaly(ctx, attempts.Anomaly{
				Kind: AnomalyMissingAtProvider, AttemptID: row.ID, ChargeID: stored,
				Detail:    map[string]any{"amount": row.Amount, "currency": row.Currency, "charge_under_key": found},
				DedupeKey: AnomalyMissingAtProvider + ":" + row.ID,
			}); err != nil {
				return err
			}
			r.log.Warn("succeeded payment missing at the provider", "payment_id", row.ID, "charge", stored, "charge_under_key", found)
		}
		if len(rows) < settleChunk {
			if len(unchecked) > 0 {
				return fmt.Errorf("succeeded payments not checked, by provider: %v: %w", unchecked, payments.ErrProviderNotConfigured)
			}
			return nil
		}
		last := rows[len(rows)-1]
		after, afterID = last.CreatedAt, last.ID
	}
}

func (r *Reconciler) anomaly(ctx context.Context, a attempts.Anomaly) error {
	a.Source = attempts.SourceReconciler
	if err := attempts.RecordAnomaly(ctx, r.pool, a); err != nil {
		return fmt.Errorf("record anomaly %s: %w", a.Kind, err)
	}
	return nil
}
