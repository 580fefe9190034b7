-- +goose Up
-- The W3C traceparent of the request (or job) whose transaction wrote the
-- event, put on the CloudEvents envelope as the distributed-tracing
-- extension. NULL when tracing was off.
ALTER TABLE outbox ADD COLUMN traceparent text;

-- +goose Down
ALTER TABLE outbox DROP COLUMN traceparent;
