-- pgbench script: the SQL one POST /v1/payments (a new key) issues, one
-- statement per round trip, with the service's commit boundaries. Written
-- from db/queries/*.sql; the service sends each of the three transactions as
-- one pipelined batch (internal/payments/fast.go), pgbench sends each
-- statement on its own: that difference is what scripts/bench.sh measures.
--
-- Not here: authentication (SELECT of the tenant by API key hash,
-- db/queries/tenants.sql): the service authenticates from an in-process
-- cache of tenants (internal/tenants/cache.go), so it is left out; and the
-- provider call between T2 and T3 (the simulator at 0 ms in the benchmark).
--
-- pgbench reads ":name" as a variable even inside a string literal, so
-- the literals that hold a colon (the JSON bodies, to_char's HH24:MI:SS) are
-- written E'…\072…': the same strings, the colon as an octal escape.
--
-- Variables: :tenant (set with -D tenant=…, a tenant that exists); every
-- transaction draws its own n, so keys, payment ids, order ids and event
-- ids are unique per transaction.
\set n random(1, 9000000000000000000)

-- T1, no explicit transaction: IdemKeyGet (db/queries/idempotency.sql), a
-- miss, and RoutingRulesGet (db/queries/routing.sql), no rules.
SELECT tenant_id, key, fingerprint, attempt_id, refund_id, lock_token, response_code, response_body,
       (locked_until IS NOT NULL AND locked_until > now())::boolean AS locked,
       GREATEST(1, CEIL(EXTRACT(EPOCH FROM (COALESCE(locked_until, now()) - now()))))::integer AS retry_after_seconds
FROM idempotency_keys
WHERE tenant_id = :tenant AND key = 'k' || :n::text;
SELECT rules FROM routing_rules WHERE tenant_id = :tenant;

-- T2: IdemKeyInsert (db/queries/idempotency.sql), AttemptInsertCalling
-- (db/queries/attempts.sql), IdemKeyRenewNew (db/queries/idempotency.sql):
-- key and attempt committed PENDING, with the audit rows CREATED and
-- PENDING, the lock renewed last. Lock TTL 30 s, key TTL 48 h (the defaults).
BEGIN;
INSERT INTO idempotency_keys (tenant_id, key, fingerprint, attempt_id, refund_id, locked_until, expires_at)
VALUES (
    :tenant, 'k' || :n::text, sha256(('fp' || :n::text)::bytea), 'pay_' || :n::text, NULL,
    now() + 30000::bigint * interval '1 millisecond',
    now() + 172800000::bigint * interval '1 millisecond'
)
ON CONFLICT (tenant_id, key) DO NOTHING
RETURNING lock_token \gset
WITH ins AS (
    INSERT INTO payment_attempts (
        id, tenant_id, order_id, idempotency_key, amount, currency,
        payment_method, description, metadata, status, provider, route
    )
    SELECT ('pay_' || :n::text)::text, (:tenant)::text, ('o' || :n::text)::text, ('k' || :n::text)::text,
           500::bigint, 'USD'::text, 'pm_card_visa'::text,
           NULL::text, NULL::jsonb, 'PENDING', 'sim'::text, '{sim}'::text[]
    WHERE EXISTS (
        SELECT 1 FROM idempotency_keys AS k
        WHERE k.tenant_id = (:tenant)::text AND k.key = ('k' || :n::text)::text
          AND k.attempt_id = ('pay_' || :n::text)::text
    )
    RETURNING *
), audit AS (
    INSERT INTO payment_attempt_events (attempt_id, from_status, to_status, source, reason)
    SELECT ins.id, s.from_status, s.to_status, 'api', s.reason
    FROM ins, (VALUES (1, NULL::text, 'CREATED', 'created'),
                      (2, 'CREATED', 'PENDING', 'calling provider ' || 'sim'::text)) AS s (n, from_status, to_status, reason)
    ORDER BY s.n
)
SELECT * FROM ins;
UPDATE idempotency_keys
SET locked_until = clock_timestamp() + 30000::bigint * interval '1 millisecond'
WHERE tenant_id = :tenant AND key = 'k' || :n::text
  AND attempt_id = ('pay_' || :n::text)::text AND response_code IS NULL;
COMMIT;

-- (the provider call: not in this script)

-- T3: AttemptFinish (db/queries/attempts.sql), OutboxInsertMoved
-- (db/queries/outbox.sql), IdemKeyCompleteMoved (db/queries/idempotency.sql),
-- fenced by the lock token T2 returned and this transaction's row version.
BEGIN;
WITH moved AS (
    UPDATE payment_attempts
    SET status             = 'SUCCEEDED'::text,
        provider_charge_id = COALESCE(('ch_' || :n::text)::text, provider_charge_id),
        failure_code       = COALESCE(NULL::text, failure_code),
        updated_at         = now()
    WHERE id = ('pay_' || :n::text)::text AND status = 'PENDING'::text
      AND EXISTS (
          SELECT 1 FROM idempotency_keys AS k
          WHERE k.tenant_id = (:tenant)::text AND k.key = ('k' || :n::text)::text
            AND k.lock_token = (:lock_token)::bigint AND k.response_code IS NULL
          FOR UPDATE
      )
    RETURNING *
), audit AS (
    INSERT INTO payment_attempt_events (attempt_id, from_status, to_status, source, reason)
    SELECT moved.id, 'PENDING'::text, 'SUCCEEDED'::text, 'api', 'charge succeeded'::text FROM moved
)
SELECT * FROM moved;
WITH ins AS (
    INSERT INTO outbox (id, type, subject, subject_id, payment_id, payload, traceparent)
    SELECT ('evt_' || :n::text)::text, 'PaymentSucceeded'::text, 'payments.succeeded'::text, ('pay_' || :n::text)::text, ('pay_' || :n::text)::text,
           ((E'{"id"\072"pay_' || :n::text || E'","tenant_id"\072"' || (:tenant)::text || E'","order_id"\072"o' || :n::text
             || E'","amount"\072500,"currency"\072"USD","status"\072"SUCCEEDED","provider"\072"sim","provider_charge_id"\072"ch_' || :n::text
             || E'","failure_code"\072null,"amount_refunded"\0720,"amount_refundable"\072500,"created_at"\072"2026-01-01T00\07200\07200Z","updated_at"\072"')::text
            || to_char(now() AT TIME ZONE 'UTC', E'YYYY-MM-DD"T"HH24\072MI\072SS"Z"') || '"}'::text)::jsonb,
           NULL::text
    WHERE EXISTS (
        SELECT 1 FROM payment_attempts AS a
        WHERE a.id = ('pay_' || :n::text)::text AND a.status = 'SUCCEEDED'::text AND a.xmin = pg_current_xact_id()::xid
    )
    ON CONFLICT (subject_id, type) DO NOTHING
    RETURNING 1
)
SELECT count(*) FROM (SELECT pg_notify('outbox', '') FROM ins) AS notified;
UPDATE idempotency_keys
SET response_code = 201::integer,
    response_body = convert_to((E'{"id"\072"pay_' || :n::text || E'","order_id"\072"o' || :n::text
             || E'","amount"\072500,"currency"\072"USD","status"\072"SUCCEEDED","provider"\072"sim","provider_charge_id"\072"ch_' || :n::text
             || E'","failure_code"\072null,"amount_refunded"\0720,"amount_refundable"\072500,"created_at"\072"2026-01-01T00\07200\07200Z","updated_at"\072"')::text
             || to_char(now() AT TIME ZONE 'UTC', E'YYYY-MM-DD"T"HH24\072MI\072SS"Z"') || '"}'::text, 'UTF8'),
    locked_until  = NULL,
    updated_at    = now()
WHERE tenant_id = (:tenant)::text AND key = ('k' || :n::text)::text
  AND lock_token = (:lock_token)::bigint AND response_code IS NULL
  AND EXISTS (
      SELECT 1 FROM payment_attempts AS a
      WHERE a.id = ('pay_' || :n::text)::text AND a.status = 'SUCCEEDED'::text AND a.xmin = pg_current_xact_id()::xid
  )
RETURNING response_body;
COMMIT;
