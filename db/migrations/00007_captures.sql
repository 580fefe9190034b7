-- +goose Up

-- Authorize now, capture later. A payment with capture_method 'manual' is
-- only authorized at the provider (AUTHORIZED, held until capture_before),
-- then captured (SUCCEEDED, amount_captured what moved) or voided or
-- expired (CANCELED, canceled_reason). amount_captured of an automatic
-- payment is its amount once SUCCEEDED. Refunds reserve against what was
-- captured.
ALTER TABLE payment_attempts
    DROP CONSTRAINT payment_attempts_status_check,
    ADD CONSTRAINT payment_attempts_status_check
        CHECK (status IN ('CREATED', 'PENDING', 'SUCCEEDED', 'FAILED', 'UNKNOWN', 'AUTHORIZED', 'CANCELED')),
    ADD COLUMN capture_method  text        NOT NULL DEFAULT 'automatic'
        CHECK (capture_method IN ('automatic', 'manual')),
    ADD COLUMN amount_captured bigint      NOT NULL DEFAULT 0,
    ADD COLUMN capture_before  timestamptz,
    ADD COLUMN canceled_reason text,
    ADD CONSTRAINT payment_attempts_held_statuses_check
        CHECK (capture_method = 'manual' OR status NOT IN ('AUTHORIZED', 'CANCELED'));
UPDATE payment_attempts SET amount_captured = amount WHERE status = 'SUCCEEDED';
ALTER TABLE payment_attempts
    DROP CONSTRAINT payment_attempts_refund_amounts_check,
    ADD CONSTRAINT payment_attempts_amounts_check
        CHECK (amount_captured >= 0 AND amount_captured <= amount
               AND amount_refunded >= 0 AND amount_refunded <= amount_reserved
               AND amount_reserved <= amount_captured);

-- The order guard: a CANCELED payment frees its order as a FAILED one does.
DROP INDEX payment_attempts_live_order_key;
CREATE UNIQUE INDEX payment_attempts_live_order_key
    ON payment_attempts (tenant_id, order_id) WHERE status NOT IN ('FAILED', 'CANCELED');
-- reconciler run's expiry check: authorizations past their capture_before.
CREATE INDEX payment_attempts_authorized_idx
    ON payment_attempts (capture_before) WHERE status = 'AUTHORIZED';

-- Captures and voids of AUTHORIZED payments: one table for both kinds, so
-- that "at most one capture or void of a payment that is not FAILED" is a
-- unique index. Each walks the states of an operation (internal/lifecycle)
-- like a refund. A capture has its amount, a void none (and maybe its reason).
CREATE TABLE captures (
    id              text        PRIMARY KEY,
    kind            text        NOT NULL CHECK (kind IN ('capture', 'void')),
    tenant_id       text        NOT NULL REFERENCES tenants (id),
    payment_id      text        NOT NULL REFERENCES payment_attempts (id),
    idempotency_key text        NOT NULL,
    amount          bigint      CHECK (amount > 0 AND amount <= 99999999999),
    currency        text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    reason          text        CHECK (reason IN ('duplicate', 'fraudulent', 'requested_by_customer', 'abandoned')),
    status          text        NOT NULL CHECK (status IN ('CREATED', 'PENDING', 'SUCCEEDED', 'FAILED', 'UNKNOWN')),
    provider        text        NOT NULL,
    failure_code    text,
    check_count     integer     NOT NULL DEFAULT 0,
    next_check_at   timestamptz,
    needs_review    boolean     NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 'capture') = (amount IS NOT NULL)),
    CHECK (kind = 'void' OR reason IS NULL)
);
CREATE UNIQUE INDEX captures_one_live_per_payment ON captures (payment_id) WHERE status <> 'FAILED';
CREATE INDEX captures_payment_created_idx ON captures (payment_id, created_at DESC, id DESC);
CREATE INDEX captures_unresolved_idx
    ON captures (next_check_at NULLS FIRST, updated_at)
    WHERE status IN ('CREATED', 'PENDING', 'UNKNOWN');

-- Append-only audit of every capture and void transition. Sources: the
-- three of the other audit tables, and an operator's console.
CREATE TABLE capture_events (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    capture_id  text        NOT NULL REFERENCES captures (id),
    from_status text,
    to_status   text        NOT NULL,
    source      text        NOT NULL CHECK (source IN ('api', 'webhook', 'reconciler', 'console')),
    reason      text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE payment_attempt_events
    DROP CONSTRAINT payment_attempt_events_source_check,
    ADD CONSTRAINT payment_attempt_events_source_check CHECK (source IN ('api', 'webhook', 'reconciler', 'console'));
ALTER TABLE refund_events
    DROP CONSTRAINT refund_events_source_check,
    ADD CONSTRAINT refund_events_source_check CHECK (source IN ('api', 'webhook', 'reconciler', 'console'));
CREATE INDEX capture_events_capture_idx ON capture_events (capture_id, id);

-- A key points at what it created: a payment, a refund, or a capture or void.
ALTER TABLE idempotency_keys
    ADD COLUMN capture_id text REFERENCES captures (id) DEFERRABLE INITIALLY DEFERRED,
    DROP CONSTRAINT idempotency_keys_one_subject_check,
    ADD CONSTRAINT idempotency_keys_one_subject_check CHECK (num_nonnulls(attempt_id, refund_id, capture_id) = 1);
CREATE INDEX idempotency_keys_capture_idx ON idempotency_keys (capture_id) WHERE capture_id IS NOT NULL;

-- +goose Down
DROP INDEX idempotency_keys_capture_idx;
ALTER TABLE idempotency_keys
    DROP CONSTRAINT idempotency_keys_one_subject_check,
    DROP COLUMN capture_id,
    ADD CONSTRAINT idempotency_keys_one_subject_check CHECK (num_nonnulls(attempt_id, refund_id) = 1);
ALTER TABLE refund_events
    DROP CONSTRAINT refund_events_source_check,
    ADD CONSTRAINT refund_events_source_check CHECK (source IN ('api', 'webhook', 'reconciler'));
ALTER TABLE payment_attempt_events
    DROP CONSTRAINT payment_attempt_events_source_check,
    ADD CONSTRAINT payment_attempt_events_source_check CHECK (source IN ('api', 'webhook', 'reconciler'));
DROP TABLE capture_events;
DROP TABLE captures;
DROP INDEX payment_attempts_authorized_idx;
DROP INDEX payment_attempts_live_order_key;
CREATE UNIQUE INDEX payment_attempts_live_order_key
    ON payment_attempts (tenant_id, order_id) WHERE status <> 'FAILED';
ALTER TABLE payment_attempts
    DROP CONSTRAINT payment_attempts_amounts_check,
    ADD CONSTRAINT payment_attempts_refund_amounts_check
        CHECK (amount_refunded >= 0 AND amount_refunded <= amount_reserved AND amount_reserved <= amount),
    DROP CONSTRAINT payment_attempts_held_statuses_check,
    DROP COLUMN canceled_reason,
    DROP COLUMN capture_before,
    DROP COLUMN amount_captured,
    DROP COLUMN capture_method,
    DROP CONSTRAINT payment_attempts_status_check,
    ADD CONSTRAINT payment_attempts_status_check
        CHECK (status IN ('CREATED', 'PENDING', 'SUCCEEDED', 'FAILED', 'UNKNOWN'));
