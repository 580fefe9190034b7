-- +goose Up

-- A tenant is one merchant calling the API. Only the SHA-256 of its API key is kept.
CREATE TABLE tenants (
    id             text        PRIMARY KEY,
    name           text        NOT NULL CHECK (name <> ''),
    api_key_sha256 bytea       NOT NULL UNIQUE,
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- One payment attempt per idempotency key. The status is the recovery point
-- of the create path; see internal/attempts/doc.go.
CREATE TABLE payment_attempts (
    id                 text        PRIMARY KEY,
    tenant_id          text        NOT NULL REFERENCES tenants (id),
    order_id           text        NOT NULL,
    idempotency_key    text        NOT NULL,
    amount             bigint      NOT NULL CHECK (amount > 0 AND amount <= 99999999999),
    currency           text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    payment_method     text        NOT NULL,
    description        text,
    metadata           jsonb,
    status             text        NOT NULL CHECK (status IN ('CREATED', 'PENDING', 'SUCCEEDED', 'FAILED', 'UNKNOWN')),
    provider           text        NOT NULL DEFAULT 'sim',
    provider_charge_id text,
    failure_code       text,
    -- reconciler bookkeeping: how often the provider was asked, when next.
    check_count        integer     NOT NULL DEFAULT 0,
    next_check_at      timestamptz,
    needs_review       boolean     NOT NULL DEFAULT false,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);

-- The order guard: at most one attempt that is not FAILED per order of a tenant.
CREATE UNIQUE INDEX payment_attempts_live_order_key
    ON payment_attempts (tenant_id, order_id) WHERE status <> 'FAILED';
CREATE INDEX payment_attempts_tenant_order_idx
    ON payment_attempts (tenant_id, order_id, created_at);
CREATE INDEX payment_attempts_charge_idx
    ON payment_attempts (provider_charge_id) WHERE provider_charge_id IS NOT NULL;
-- The reconciler's work list: only unresolved attempts are indexed, so a run
-- costs what is due, not what the table holds.
CREATE INDEX payment_attempts_unresolved_idx
    ON payment_attempts (next_check_at NULLS FIRST, updated_at)
    WHERE status IN ('CREATED', 'PENDING', 'UNKNOWN');

-- Append-only audit of every transition.
CREATE TABLE payment_attempt_events (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    attempt_id  text        NOT NULL REFERENCES payment_attempts (id),
    from_status text,
    to_status   text        NOT NULL,
    source      text        NOT NULL CHECK (source IN ('api', 'webhook', 'reconciler')),
    reason      text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX payment_attempt_events_attempt_idx ON payment_attempt_events (attempt_id, id);

-- Idempotency keys: who owns a key is decided by the primary key, never by a
-- select-then-insert. lock_token grows on every acquisition so that a stale
-- owner can prove nothing.
CREATE TABLE idempotency_keys (
    tenant_id     text        NOT NULL REFERENCES tenants (id),
    key           text        NOT NULL,
    fingerprint   bytea       NOT NULL,
    attempt_id    text        NOT NULL REFERENCES payment_attempts (id) DEFERRABLE INITIALLY DEFERRED,
    lock_token    bigint      NOT NULL DEFAULT 1,
    locked_until  timestamptz,
    response_code integer,
    response_body bytea,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, key),
    CHECK ((response_code IS NULL) = (response_body IS NULL))
);
CREATE INDEX idempotency_keys_expires_idx ON idempotency_keys (expires_at);
CREATE INDEX idempotency_keys_attempt_idx ON idempotency_keys (attempt_id);

-- Provider webhooks seen, deduplicated by (provider, event id).
CREATE TABLE webhook_events (
    provider    text        NOT NULL,
    event_id    text        NOT NULL,
    type        text        NOT NULL,
    charge_id   text,
    attempt_id  text,
    outcome     text        NOT NULL,
    payload     jsonb       NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, event_id)
);

-- Transactional outbox: written in the transaction that makes a payment SUCCEEDED.
CREATE TABLE outbox (
    id               text        PRIMARY KEY,
    type             text        NOT NULL,
    payment_id       text        NOT NULL REFERENCES payment_attempts (id),
    payload          jsonb       NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    published_at     timestamptz,
    publish_attempts integer     NOT NULL DEFAULT 0,
    last_error       text,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (payment_id, type)
);
CREATE INDEX outbox_unpublished_idx ON outbox (next_attempt_at, created_at) WHERE published_at IS NULL;

-- Anomalies: reports that contradict what we know, for settlement and humans.
CREATE TABLE anomalies (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind        text        NOT NULL,
    attempt_id  text,
    charge_id   text,
    source      text        NOT NULL,
    detail      jsonb       NOT NULL DEFAULT '{}',
    dedupe_key  text        UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX anomalies_created_idx ON anomalies (created_at);

-- +goose Down
DROP TABLE anomalies;
DROP TABLE outbox;
DROP TABLE webhook_events;
DROP TABLE idempotency_keys;
DROP TABLE payment_attempt_events;
DROP TABLE payment_attempts;
DROP TABLE tenants;
