-- +goose Up

-- The console's merchant deliveries (docs/console.md): an operator may
-- retry one from a payment's page. Its audit row has source 'console', and
-- carries the key of the form that asked, so that the form sent twice
-- retries once (the unique index is the guard; the retry checks for the
-- key under the delivery's row lock first).
ALTER TABLE webhook_delivery_events
    DROP CONSTRAINT webhook_delivery_events_source_check,
    ADD CONSTRAINT webhook_delivery_events_source_check CHECK (source IN ('worker', 'api', 'console')),
    ADD COLUMN form_key text;
CREATE UNIQUE INDEX webhook_delivery_events_form_key_idx
    ON webhook_delivery_events (delivery_id, form_key) WHERE form_key IS NOT NULL;

-- The overview's count of failing deliveries reads the failed ones of the
-- last 24 h by this index (the pending ones by webhook_deliveries_due_idx).
-- On a large table build it first, CONCURRENTLY (docs/operations.md).
CREATE INDEX IF NOT EXISTS webhook_deliveries_failed_idx ON webhook_deliveries (updated_at) WHERE status = 'failed';

-- +goose Down
DROP INDEX webhook_deliveries_failed_idx;
DROP INDEX webhook_delivery_events_form_key_idx;
UPDATE webhook_delivery_events SET source = 'api' WHERE source = 'console';
ALTER TABLE webhook_delivery_events
    DROP COLUMN form_key,
    DROP CONSTRAINT webhook_delivery_events_source_check,
    ADD CONSTRAINT webhook_delivery_events_source_check CHECK (source IN ('worker', 'api'));
