-- pgbench script: the SQL one replayed POST /v1/payments issues (a key
-- already completed, same fingerprint): IdemKeyGet (db/queries/idempotency.sql),
-- one statement, no transaction (internal/payments/fast.go reads the key
-- first and replays from it).
--
-- Not here: authentication (SELECT of the tenant by API key hash,
-- db/queries/tenants.sql), left out as in create.sql: the service
-- authenticates from an in-process cache of tenants (internal/tenants/cache.go).
--
-- Variables: :tenant and the completed key 'bench-replay', both inserted by
-- scripts/bench.sh before the run.
SELECT tenant_id, key, fingerprint, attempt_id, refund_id, lock_token, response_code, response_body,
       (locked_until IS NOT NULL AND locked_until > now())::boolean AS locked,
       GREATEST(1, CEIL(EXTRACT(EPOCH FROM (COALESCE(locked_until, now()) - now()))))::integer AS retry_after_seconds
FROM idempotency_keys
WHERE tenant_id = :tenant AND key = 'bench-replay';
