-- +goose Up

-- Refund amounts on the payment. amount_reserved is the sum of its refunds
-- that are not FAILED (reserved when a refund is created, in the same
-- statement that checks it fits, and released when a refund fails);
-- amount_refunded the sum of its SUCCEEDED refunds.
ALTER TABLE payment_attempts
    ADD COLUMN amount_reserved bigint NOT NULL DEFAULT 0,
    ADD COLUMN amount_refunded bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT payment_attempts_refund_amounts_check
        CHECK (amount_refunded >= 0 AND amount_refunded <= amount_reserved AND amount_reserved <= amount);

-- Lists: newest first, keyset (created_at, id) per tenant and per order.
CREATE INDEX payment_attempts_tenant_created_idx
    ON payment_attempts (tenant_id, created_at DESC, id DESC);
DROP INDEX payment_attempts_tenant_order_idx;
CREATE INDEX payment_attempts_tenant_order_idx
    ON payment_attempts (tenant_id, order_id, created_at DESC, id DESC);

-- One refund of a payment per idempotency key. It walks the same states as a
-- payment (see internal/lifecycle).
CREATE TABLE refunds (
    id                 text        PRIMARY KEY,
    tenant_id          text        NOT NULL REFERENCES tenants (id),
    payment_id         text        NOT NULL REFERENCES payment_attempts (id),
    idempotency_key    text        NOT NULL,
    amount             bigint      NOT NULL CHECK (amount > 0 AND amount <= 99999999999),
    currency           text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    reason             text        CHECK (reason IN ('duplicate', 'fraudulent', 'requested_by_customer', 'other')),
    metadata           jsonb       NOT NULL DEFAULT '{}',
    status             text        NOT NULL CHECK (status IN ('CREATED', 'PENDING', 'SUCCEEDED', 'FAILED', 'UNKNOWN')),
    provider           text        NOT NULL,
    provider_refund_id text,
    failure_code       text,
    check_count        integer     NOT NULL DEFAULT 0,
    next_check_at      timestamptz,
    needs_review       boolean     NOT NULL DEFAULT false,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX refunds_payment_created_idx ON refunds (payment_id, created_at DESC, id DESC);
CREATE INDEX refunds_provider_refund_idx ON refunds (provider_refund_id) WHERE provider_refund_id IS NOT NULL;
CREATE INDEX refunds_unresolved_idx
    ON refunds (next_check_at NULLS FIRST, updated_at)
    WHERE status IN ('CREATED', 'PENDING', 'UNKNOWN');

-- Append-only audit of every refund transition.
CREATE TABLE refund_events (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    refund_id   text        NOT NULL REFERENCES refunds (id),
    from_status text,
    to_status   text        NOT NULL,
    source      text        NOT NULL CHECK (source IN ('api', 'webhook', 'reconciler')),
    reason      text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX refund_events_refund_idx ON refund_events (refund_id, id);

-- A key points at what it created: a payment or a refund.
ALTER TABLE idempotency_keys
    ALTER COLUMN attempt_id DROP NOT NULL,
    ADD COLUMN refund_id text REFERENCES refunds (id) DEFERRABLE INITIALLY DEFERRED,
    ADD CONSTRAINT idempotency_keys_one_subject_check CHECK (num_nonnulls(attempt_id, refund_id) = 1);
CREATE INDEX idempotency_keys_refund_idx ON idempotency_keys (refund_id) WHERE refund_id IS NOT NULL;

-- Events once per (subject, type): a payment's PaymentSucceeded or
-- PaymentFailed, a refund's PaymentRefunded or PaymentRefundFailed. Each row
-- names the JetStream subject it is published on.
ALTER TABLE outbox
    ADD COLUMN subject_id text,
    ADD COLUMN subject    text;
UPDATE outbox SET subject_id = payment_id, subject = 'payments.succeeded';
ALTER TABLE outbox
    ALTER COLUMN subject_id SET NOT NULL,
    ALTER COLUMN subject SET NOT NULL,
    DROP CONSTRAINT outbox_payment_id_type_key,
    ADD CONSTRAINT outbox_subject_id_type_key UNIQUE (subject_id, type);

-- +goose Down
ALTER TABLE outbox
    DROP CONSTRAINT outbox_subject_id_type_key,
    ADD CONSTRAINT outbox_payment_id_type_key UNIQUE (payment_id, type),
    DROP COLUMN subject,
    DROP COLUMN subject_id;
DROP INDEX idempotency_keys_refund_idx;
ALTER TABLE idempotency_keys
    DROP CONSTRAINT idempotency_keys_one_subject_check,
    DROP COLUMN refund_id,
    ALTER COLUMN attempt_id SET NOT NULL;
DROP TABLE refund_events;
DROP TABLE refunds;
DROP INDEX payment_attempts_tenant_order_idx;
CREATE INDEX payment_attempts_tenant_order_idx ON payment_attempts (tenant_id, order_id, created_at);
DROP INDEX payment_attempts_tenant_created_idx;
ALTER TABLE payment_attempts
    DROP CONSTRAINT payment_attempts_refund_amounts_check,
    DROP COLUMN amount_refunded,
    DROP COLUMN amount_reserved;
