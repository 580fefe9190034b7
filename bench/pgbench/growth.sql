-- Bulk load for make bench-growth (scripts/bench-growth.sh, run with psql
-- -v tenant=… -v rows=…): :rows SUCCEEDED payments of one tenant with
-- distinct order ids, each with its completed idempotency key (expires in
-- 48 h, like IDEMPOTENCY_KEY_TTL's default) and its three audit rows
-- (CREATED, PENDING, SUCCEEDED), as the create path leaves them
-- (db/queries/attempts.sql AttemptInsertCalling and AttemptFinish,
-- db/queries/idempotency.sql IdemKeyCompleteMoved). Spread over the last 30
-- days by created_at. Outbox rows are not loaded: published ones are gc'd.
\set ON_ERROR_STOP 1
BEGIN;
INSERT INTO payment_attempts (id, tenant_id, order_id, idempotency_key, amount, currency, payment_method,
                              status, provider, provider_charge_id, route, created_at, updated_at)
SELECT 'pay_g' || i, :'tenant', 'order-g' || i, 'key-g' || i, 500 + i % 1000, 'USD', 'pm_card_visa',
       'SUCCEEDED', 'sim', 'ch_g' || i, '{sim}',
       now() - (i % 2592000) * interval '1 second', now() - (i % 2592000) * interval '1 second'
FROM generate_series(1, :rows) AS i;
INSERT INTO idempotency_keys (tenant_id, key, fingerprint, attempt_id, lock_token, response_code, response_body,
                              created_at, updated_at, expires_at)
SELECT :'tenant', 'key-g' || i, sha256(('key-g' || i)::bytea), 'pay_g' || i, 1, 201,
       convert_to('{"id":"pay_g' || i || '","order_id":"order-g' || i || '","amount":' || (500 + i % 1000)
                  || ',"currency":"USD","status":"SUCCEEDED","provider":"sim","provider_charge_id":"ch_g' || i
                  || '","failure_code":null,"amount_refunded":0,"amount_refundable":' || (500 + i % 1000)
                  || ',"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}', 'UTF8'),
       now(), now(), now() + interval '48 hours'
FROM generate_series(1, :rows) AS i;
INSERT INTO payment_attempt_events (attempt_id, from_status, to_status, source, reason)
SELECT 'pay_g' || i, s.from_status, s.to_status, 'api', s.reason
FROM generate_series(1, :rows) AS i,
     (VALUES (1, NULL::text, 'CREATED', 'created'),
             (2, 'CREATED', 'PENDING', 'calling provider sim'),
             (3, 'PENDING', 'SUCCEEDED', 'charge succeeded')) AS s (n, from_status, to_status, reason)
ORDER BY i, s.n;
COMMIT;
ANALYZE;
