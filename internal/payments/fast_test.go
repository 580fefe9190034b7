package payments_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testdb"
)

// A new payment takes the create path of one round trip per transaction
// (internal/payments/fast.go). Whatever the provider answers, it commits
// what the transaction-per-step path commits: the audited path CREATED →
// PENDING → outcome, with its reasons; for a final outcome one event whose
// data is the payment as committed (updated_at included, which the
// database stamps) with its tenant, and no NOTIFY but a signal of the pod's
// outbox.Wakeup after the commit, and the answer stored on the key byte
// for byte, which a retry replays; for UNKNOWN no event and a released key.
func TestFastPathCommitsWhatTheGeneralPathCommits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		method  string
		faults  providersim.Faults
		code    int
		status  attempts.Status
		reason  string
		event   string
		failure string
		capture string
	}{
		{"succeeded", "pm_card_visa", providersim.Faults{}, http.StatusCreated, attempts.Succeeded, "provider sim succeeded", attempts.EventPaymentSucceeded, "", ""},
		{"declined", "pm_card_declined", providersim.Faults{}, http.StatusPaymentRequired, attempts.Failed, "provider sim declined", attempts.EventPaymentFailed, "card_declined", ""},
		{"unknown", "pm_card_visa", providersim.Faults{DropAfterCommit: true}, http.StatusAccepted, attempts.Unknown, "", "", "", ""},
		// A manual payment's AUTHORIZED answers the create for good: stored, with its event.
		{"authorized", "pm_card_visa", providersim.Faults{}, http.StatusCreated, attempts.Authorized, "provider sim authorized", attempts.EventPaymentAuthorized, "", attempts.CaptureManual},
		{"manual declined", "pm_card_declined", providersim.Faults{}, http.StatusPaymentRequired, attempts.Failed, "provider sim declined", attempts.EventPaymentFailed, "card_declined", attempts.CaptureManual},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.sim.SetFaults(t, tc.faults)
			in := b.input("key-fast-"+tc.name, "order-fast-"+tc.name)
			in.PaymentMethod, in.CaptureMethod = tc.method, tc.capture
			wakeup := outbox.NewWakeup()
			b.svc.UseOutboxWakeup(wakeup)

			r, err := b.svc.Create(b.ctx, in)
			require.NoError(t, err)
			// The commit sent no NOTIFY: the pod's relay is woken only
			// through its Wakeup, signalled before the answer.
			woken := false
			select {
			case <-wakeup:
				woken = true
			default:
			}
			require.Equal(t, tc.event != "", woken, "the relay is woken exactly when an event was written")
			require.Equal(t, tc.code, r.Code, "%s", r.Body)
			require.False(t, r.Replayed)
			p := payment(t, r)
			require.Equal(t, tc.status, p.Status)
			require.Equal(t, "sim", *p.Provider)
			if tc.failure != "" {
				require.Equal(t, tc.failure, *p.FailureCode)
			}

			// The answer is the payment as committed, to the second.
			a := b.get(r.PaymentID)
			require.Equal(t, a.Public(), p)
			require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending, tc.status}, b.history(a.ID))
			reasons := b.reasons(a.ID)
			require.Equal(t, []string{"created", "calling provider sim"}, reasons[:2])
			if tc.reason != "" {
				require.Equal(t, tc.reason, reasons[2])
			}

			k := b.key(in.IdempotencyKey)
			require.False(t, k.locked)
			if tc.event == "" {
				require.Nil(t, k.code, "an unresolved payment's key is released, not completed")
				require.Zero(t, b.count(`SELECT count(*) FROM outbox WHERE payment_id = $1`, a.ID))
				return
			}
			require.NotNil(t, k.code)
			require.EqualValues(t, tc.code, *k.code)
			require.Equal(t, string(r.Body), string(k.body), "the stored answer is the answer, byte for byte")

			require.Equal(t, 1, b.count(`SELECT count(*) FROM outbox WHERE payment_id = $1`, a.ID))
			var typ string
			var payload []byte
			require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT type, payload FROM outbox WHERE payment_id = $1`, a.ID).Scan(&typ, &payload))
			require.Equal(t, tc.event, typ)
			want := a.Public()
			want.TenantID = b.tenantID
			var got attempts.Payment
			require.NoError(t, json.Unmarshal(payload, &got))
			require.Equal(t, want, got, "the event carries the payment as committed")
			require.Equal(t, a.UpdatedAt.UTC().Truncate(time.Second), got.UpdatedAt)

			again, err := b.svc.Create(b.ctx, in)
			require.NoError(t, err)
			require.True(t, again.Replayed)
			require.Equal(t, tc.code, again.Code)
			require.Equal(t, string(r.Body), string(again.Body))
			require.EqualValues(t, 1, b.sim.Stats(t).ChargeCalls, "a replay calls nothing")
		})
	}
}

// reasons is the audit trail's reasons, oldest first.
func (b *bundle) reasons(id string) []string {
	b.t.Helper()
	return testdb.Strings[string](b.ctx, b.t, b.pool, `SELECT reason FROM payment_attempt_events WHERE attempt_id = $1 ORDER BY id`, id)
}

// TestFastPathCommitSendsNoNotify listens on channel outbox while a payment
// succeeds on the create path, then notifies a marker: notifications arrive
// in commit order, so the marker comes first exactly when the payment's
// commit (which wrote its event) sent none. A NOTIFY per commit would
// serialise the create path's commits cluster-wide (outbox.Wakeup).
func TestFastPathCommitSendsNoNotify(t *testing.T) {
	t.Parallel()
	b := setup(t)
	conn, err := b.pool.Acquire(b.ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(b.ctx, "LISTEN outbox")
	require.NoError(t, err)

	r, err := b.svc.Create(b.ctx, b.input("key-no-notify", "order-no-notify"))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM outbox WHERE payment_id = $1`, r.PaymentID))
	_, err = b.pool.Exec(b.ctx, "SELECT pg_notify('outbox', 'marker')")
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	n, err := conn.Conn().WaitForNotification(ctx)
	require.NoError(t, err)
	require.Equal(t, "marker", n.Payload, "the payment's commit sent a NOTIFY of its own before the marker")
}
