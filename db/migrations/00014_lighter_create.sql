-- +goose Up
-- Less database work per created payment (issue 26; docs/BENCHMARKS.md,
-- "Where the database's work per payment goes").
--
-- reconciler settle's day of SUCCEEDED attempts by creation time is read
-- through payment_attempts_created_idx (00010) with a filter on status; this
-- partial index cost one more index entry on every move to SUCCEEDED.
DROP INDEX IF EXISTS payment_attempts_succeeded_created_idx;

-- Every payment's attempt and key name the tenant that authenticated the
-- request, and no tenant is ever deleted: the foreign keys to tenants
-- only took a KEY SHARE lock on the one tenant row per insert (and again on
-- the key's update in its own transaction), a multixact shared by every
-- concurrent create of the tenant, with its WAL. The foreign keys between a
-- payment's own rows stay.
ALTER TABLE payment_attempts DROP CONSTRAINT IF EXISTS payment_attempts_tenant_id_fkey;
ALTER TABLE idempotency_keys DROP CONSTRAINT IF EXISTS idempotency_keys_tenant_id_fkey;

-- +goose Down
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id);
ALTER TABLE payment_attempts ADD CONSTRAINT payment_attempts_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id);
CREATE INDEX payment_attempts_succeeded_created_idx
    ON payment_attempts (created_at) WHERE status = 'SUCCEEDED';
