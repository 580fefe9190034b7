-- Setup of the pgbench scripts (scripts/bench.sh runs it with psql after the
-- migrations): the tenant ten_pgbench, and the completed key 'bench-replay'
-- of one SUCCEEDED payment that replay.sql reads.
INSERT INTO tenants (id, name, api_key_sha256)
VALUES ('ten_pgbench', 'pgbench', sha256('pgbench-not-a-key'::bytea))
ON CONFLICT (id) DO NOTHING;
BEGIN;
INSERT INTO payment_attempts (id, tenant_id, order_id, idempotency_key, amount, currency, payment_method, status, provider, provider_charge_id, route)
VALUES ('pay_pgbench_replay', 'ten_pgbench', 'order-pgbench-replay', 'bench-replay', 500, 'USD', 'pm_card_visa', 'SUCCEEDED', 'sim', 'ch_pgbench_replay', '{sim}')
ON CONFLICT (id) DO NOTHING;
INSERT INTO idempotency_keys (tenant_id, key, fingerprint, attempt_id, response_code, response_body, expires_at)
VALUES ('ten_pgbench', 'bench-replay', sha256('bench-replay'::bytea), 'pay_pgbench_replay', 201,
        convert_to('{"id":"pay_pgbench_replay","order_id":"order-pgbench-replay","amount":500,"currency":"USD","status":"SUCCEEDED","provider":"sim","provider_charge_id":"ch_pgbench_replay","failure_code":null,"amount_refunded":0,"amount_refundable":500,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}', 'UTF8'),
        now() + interval '48 hours')
ON CONFLICT (tenant_id, key) DO NOTHING;
COMMIT;
