-- +goose Up
-- reconciler gc deletes webhook events received, and outbox rows published,
-- longer ago than their retention, oldest first, in batches; these indexes
-- let each batch read only what it deletes. (Plain CREATE INDEX: it briefly
-- blocks writes to the two tables while it builds, which is short on tables
-- that gc keeps small; see docs/operations.md.)
CREATE INDEX webhook_events_received_idx ON webhook_events (received_at);
CREATE INDEX outbox_published_idx ON outbox (published_at) WHERE published_at IS NOT NULL;

-- +goose Down
DROP INDEX outbox_published_idx;
DROP INDEX webhook_events_received_idx;
