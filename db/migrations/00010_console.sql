-- +goose Up

-- The operator console (docs/console.md). Operators are the people who run
-- the service, not tenants; only a slow salted hash (argon2id) of a password
-- is kept. A disabled operator keeps its row (the audit trail names it).
CREATE TABLE operators (
    id            text        PRIMARY KEY,
    email         text        NOT NULL UNIQUE CHECK (email <> '' AND email = lower(email)),
    role          text        NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    password_hash text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    disabled_at   timestamptz
);

-- Console sessions, kept server-side. Only the SHA-256 of the session id
-- (the cookie's value, 160 random bits) is stored, so a copy of the table
-- signs nobody in. The CSRF token is the session's, one for its life.
CREATE TABLE console_sessions (
    id_sha256    bytea       PRIMARY KEY,
    operator_id  text        NOT NULL REFERENCES operators (id),
    csrf_token   text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX console_sessions_operator_idx ON console_sessions (operator_id);
CREATE INDEX console_sessions_created_idx ON console_sessions (created_at);

-- Failed sign-ins per email (known or not): five within 15 minutes lock the
-- email out for 15 minutes, on every pod (the count is here, not in memory).
CREATE TABLE console_login_failures (
    email           text        PRIMARY KEY,
    failures        integer     NOT NULL,
    window_start_at timestamptz NOT NULL DEFAULT now(),
    locked_until    timestamptz
);
CREATE INDEX console_login_failures_window_idx ON console_login_failures (window_start_at);

-- What the console changes is audited like the rest, with source 'console'
-- (the audit tables' source checks take it since 00007_captures.sql).

-- An anomaly an operator looked into: who, when and what they found.
ALTER TABLE anomalies
    ADD COLUMN resolved_at     timestamptz,
    ADD COLUMN resolved_by     text,
    ADD COLUMN resolution_note text;
CREATE INDEX anomalies_open_idx ON anomalies (created_at DESC, id DESC) WHERE resolved_at IS NULL;

-- A tenant made from the console carries the key of the form that made it,
-- so a form submitted twice makes one tenant.
ALTER TABLE tenants ADD COLUMN creation_key text UNIQUE;

-- The console's reads: every tenant's payments newest first, a payment's
-- webhooks and events, a search by order id across tenants. On a large
-- payment_attempts, build its two indexes
-- beforehand with CREATE INDEX CONCURRENTLY IF NOT EXISTS (docs/operations.md).
CREATE INDEX IF NOT EXISTS payment_attempts_created_idx ON payment_attempts (created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS webhook_events_attempt_idx ON webhook_events (attempt_id) WHERE attempt_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS payment_attempts_order_idx ON payment_attempts (order_id);
CREATE INDEX IF NOT EXISTS outbox_payment_idx ON outbox (payment_id);

-- +goose Down
DROP INDEX outbox_payment_idx;
DROP INDEX payment_attempts_order_idx;
DROP INDEX webhook_events_attempt_idx;
DROP INDEX payment_attempts_created_idx;
ALTER TABLE tenants DROP COLUMN creation_key;
DROP INDEX anomalies_open_idx;
ALTER TABLE anomalies DROP COLUMN resolution_note, DROP COLUMN resolved_by, DROP COLUMN resolved_at;
DROP TABLE console_login_failures;
DROP TABLE console_sessions;
DROP TABLE operators;
