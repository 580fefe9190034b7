-- +goose Up
-- reconciler settle reads a day's SUCCEEDED attempts by creation time.
CREATE INDEX payment_attempts_succeeded_created_idx
    ON payment_attempts (created_at) WHERE status = 'SUCCEEDED';

-- +goose Down
DROP INDEX payment_attempts_succeeded_created_idx;
