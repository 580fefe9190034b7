package testdb

import (
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/payments"
)

// AttemptsOpts describe many attempts to seed at once.
type AttemptsOpts struct {
	TenantID string // required
	Prefix   string // the i-th attempt (from 1) has id, order id and key Prefix+i
	N        int
	// Statuses cycle: the i-th attempt's status is Statuses[(i-1) % len];
	// default UNKNOWN.
	Statuses     []attempts.Status
	Age          time.Duration // created and last changed that long ago
	KeyExpiresIn time.Duration // from now (negative: expired); default payments.DefaultKeyTTL
	// Outbox moves the SUCCEEDED ones there through attempts.Transition, so
	// that each gets its PaymentSucceeded outbox row as the service writes
	// it: about a millisecond an attempt, for hundreds, not 100,000.
	Outbox bool
}

// Attempts seeds o.N attempts in a few statements and returns their ids:
// each in its status with the audit rows of the API's path to it (source
// api), a charge id (ch_ + id) when final or AUTHORIZED (AUTHORIZED and
// CANCELED ones are manual), and its key, released, or holding the
// service's response code when it answered for good. It writes with SQL, for
// tests that need thousands of attempts, where a fixture per attempt
// through the service's functions would take minutes; Attempt seeds one
// attempt through them.
func Attempts(t testing.TB, pool *db.Pool, o AttemptsOpts) []string {
	t.Helper()
	ctx := seedContext(t)
	if len(o.Statuses) == 0 {
		o.Statuses = []attempts.Status{attempts.Unknown}
	}
	if o.KeyExpiresIn == 0 {
		o.KeyExpiresIn = payments.DefaultKeyTTL
	}
	ids := make([]string, o.N)
	inserted := make([]string, o.N) // the status each is inserted in
	codes := make([]*int32, o.N)    // the key's stored response code
	var succeeded []string          // to move there with attempts.Transition
	for i := range o.N {
		ids[i] = o.Prefix + strconv.Itoa(i+1)
		st := o.Statuses[i%len(o.Statuses)]
		if st.Answered() {
			code := int32(payments.StatusCode(st))
			codes[i] = &code
		}
		if st == attempts.Succeeded && o.Outbox {
			succeeded = append(succeeded, ids[i])
			st = attempts.Unknown
		}
		inserted[i] = string(st)
	}
	// The audit rows of each status's path, as parallel columns.
	var pathStatus, pathFrom, pathTo []*string
	var pathStep []int32
	for st, path := range paths {
		s := string(st)
		from := (*string)(nil)
		for step, to := range append([]attempts.Status{attempts.Created}, path...) {
			to := string(to)
			pathStatus, pathStep, pathFrom, pathTo = append(pathStatus, &s), append(pathStep, int32(step)), append(pathFrom, from), append(pathTo, &to)
			from = &to
		}
	}
	err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			INSERT INTO payment_attempts (id, tenant_id, order_id, idempotency_key, amount, currency, payment_method,
			                              status, provider, provider_charge_id, failure_code, created_at, updated_at,
			                              capture_method, amount_captured, capture_before, canceled_reason)
			SELECT u.id, $1, u.id, u.id, 500, 'USD', 'pm_card_visa', u.status,
			       CASE WHEN u.status <> 'CREATED' THEN 'sim' END,
			       CASE WHEN u.status IN ('SUCCEEDED', 'FAILED', 'AUTHORIZED', 'CANCELED') THEN 'ch_' || u.id END,
			       CASE WHEN u.status = 'FAILED' THEN 'card_declined' END,
			       now() - $4::bigint * interval '1 millisecond', now() - $4::bigint * interval '1 millisecond',
			       CASE WHEN u.status IN ('AUTHORIZED', 'CANCELED') THEN 'manual' ELSE 'automatic' END,
			       CASE WHEN u.status = 'SUCCEEDED' THEN 500 ELSE 0 END,
			       CASE WHEN u.status = 'AUTHORIZED' THEN now() + interval '7 days' END,
			       CASE WHEN u.status = 'CANCELED' THEN 'expired' END
			FROM unnest($2::text[], $3::text[]) AS u(id, status)`,
			o.TenantID, ids, inserted, o.Age.Milliseconds())
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO payment_attempt_events (attempt_id, from_status, to_status, source, reason)
			SELECT a.id, p.from_status, p.to_status, 'api', 'fixture'
			FROM unnest($1::text[], $2::text[]) AS a(id, status)
			JOIN unnest($3::text[], $4::int[], $5::text[], $6::text[]) AS p(status, step, from_status, to_status)
			  ON p.status = a.status
			ORDER BY a.id, p.step`, ids, inserted, pathStatus, pathStep, pathFrom, pathTo)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO idempotency_keys (tenant_id, key, fingerprint, attempt_id, response_code, response_body, created_at, expires_at)
			SELECT $1, u.id, $2, u.id, u.code, CASE WHEN u.code IS NOT NULL THEN '{}'::bytea END,
			       now() - $5::bigint * interval '1 millisecond', now() + $6::bigint * interval '1 millisecond'
			FROM unnest($3::text[], $4::int[]) AS u(id, code)`,
			o.TenantID, Fingerprint, ids, codes, o.Age.Milliseconds(), o.KeyExpiresIn.Milliseconds())
		if err != nil {
			return err
		}
		for _, id := range succeeded {
			_, applied, err := attempts.Transition(ctx, tx, attempts.Change{
				ID: id, To: attempts.Succeeded, ChargeID: "ch_" + id, Source: attempts.SourceAPI, Reason: "fixture",
			})
			if err != nil {
				return err
			}
			if !applied {
				t.Errorf("testdb: seed %s: transition to SUCCEEDED not applied", id)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("testdb: seed %d attempts: %v", o.N, err)
	}
	return ids
}
