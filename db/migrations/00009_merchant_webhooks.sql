-- +goose Up

-- A tenant's HTTPS endpoint that receives its events (internal/delivery).
-- The signing secret is kept in clear because signing needs it; the one it
-- replaced keeps signing beside it until previous_secret_expires_at. A
-- deleted endpoint keeps its row (its deliveries and key still name it)
-- but loses its secrets.
CREATE TABLE webhook_endpoints (
    id                         text        PRIMARY KEY,
    tenant_id                  text        NOT NULL REFERENCES tenants (id),
    url                        text        NOT NULL,
    event_types                text[],     -- NULL: every type
    description                text,
    secret                     text,
    previous_secret            text,
    previous_secret_expires_at timestamptz,
    created_at                 timestamptz NOT NULL DEFAULT now(),
    updated_at                 timestamptz NOT NULL DEFAULT now(),
    deleted_at                 timestamptz,
    CONSTRAINT webhook_endpoints_secret_check CHECK ((deleted_at IS NULL) = (secret IS NOT NULL)),
    CONSTRAINT webhook_endpoints_previous_secret_check
        CHECK ((previous_secret IS NULL) = (previous_secret_expires_at IS NULL))
);
-- Lists and the fan-out read a tenant's live endpoints.
CREATE INDEX webhook_endpoints_tenant_created_idx
    ON webhook_endpoints (tenant_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;

-- Append-only audit of an endpoint's changes.
CREATE TABLE webhook_endpoint_events (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id text        NOT NULL REFERENCES webhook_endpoints (id),
    kind        text        NOT NULL CHECK (kind IN ('created', 'secret_rotated', 'deleted')),
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_endpoint_events_endpoint_idx ON webhook_endpoint_events (endpoint_id, id);

-- One event of the outbox, as every endpoint that subscribes to it gets it:
-- the exact body that is signed and sent. Written by the relay's fan-out,
-- only for an event that has at least one delivery.
CREATE TABLE webhook_messages (
    event_id   text        PRIMARY KEY,
    tenant_id  text        NOT NULL,
    event_type text        NOT NULL,
    payment_id text        NOT NULL,
    body       bytea       NOT NULL,
    created_at timestamptz NOT NULL -- the event's
);

-- One event to one endpoint: the delivery queue and its log. A pending
-- delivery is due at next_attempt_at; a pod that claims it sets
-- claimed_until past its attempt (its lease) and bumps lease, so a crashed
-- pod's claim lapses by itself and a late answer of a superseded claim
-- changes no state. The claim writes no indexed column, and the table
-- leaves room in its pages, so that write is a HOT update (no index entry):
-- at thousands of deliveries a second, each row is written twice.
-- schedule_step is how many retries of the current schedule are spent (a
-- manual retry starts it again); attempts counts them all.
CREATE TABLE webhook_deliveries (
    id               text        PRIMARY KEY,
    tenant_id        text        NOT NULL,
    endpoint_id      text        NOT NULL REFERENCES webhook_endpoints (id),
    event_id         text        NOT NULL REFERENCES webhook_messages (event_id) DEFERRABLE INITIALLY DEFERRED,
    event_type       text        NOT NULL,
    payment_id       text        NOT NULL,
    status           text        NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         integer     NOT NULL DEFAULT 0,
    schedule_step    integer     NOT NULL DEFAULT 0,
    lease            bigint      NOT NULL DEFAULT 0,
    claimed_until    timestamptz NOT NULL DEFAULT 'epoch',
    next_attempt_at  timestamptz,
    last_status_code integer,
    last_error       text,
    delivered_at     timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT webhook_deliveries_endpoint_event_key UNIQUE (endpoint_id, event_id),
    CONSTRAINT webhook_deliveries_due_check CHECK ((status = 'pending') = (next_attempt_at IS NOT NULL))
) WITH (fillfactor = 80);
-- The queue: only pending deliveries are indexed, so a claim costs what is
-- due, not what the table holds.
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_endpoint_created_idx
    ON webhook_deliveries (endpoint_id, created_at DESC, id DESC);
CREATE INDEX webhook_deliveries_payment_idx ON webhook_deliveries (payment_id);

-- Append-only audit of every attempt and every other change of a delivery.
CREATE TABLE webhook_delivery_events (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id text        NOT NULL REFERENCES webhook_deliveries (id),
    from_status text        NOT NULL,
    to_status   text        NOT NULL,
    source      text        NOT NULL CHECK (source IN ('worker', 'api')),
    reason      text        NOT NULL,
    attempt     integer,    -- the attempt's number, for an attempt
    status_code integer,
    error       text,
    duration_ms integer,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_delivery_events_delivery_idx ON webhook_delivery_events (delivery_id, id);

-- A key points at what it created: a payment, a refund, a capture or void
-- (00007) or, now, a webhook
-- endpoint (POST /v1/webhook_endpoints with an Idempotency-Key).
ALTER TABLE idempotency_keys
    ADD COLUMN endpoint_id text REFERENCES webhook_endpoints (id) DEFERRABLE INITIALLY DEFERRED,
    DROP CONSTRAINT idempotency_keys_one_subject_check,
    ADD CONSTRAINT idempotency_keys_one_subject_check CHECK (num_nonnulls(attempt_id, refund_id, capture_id, endpoint_id) = 1);
CREATE INDEX idempotency_keys_endpoint_idx ON idempotency_keys (endpoint_id) WHERE endpoint_id IS NOT NULL;

-- +goose Down
DROP INDEX idempotency_keys_endpoint_idx;
DELETE FROM idempotency_keys WHERE endpoint_id IS NOT NULL;
ALTER TABLE idempotency_keys
    DROP CONSTRAINT idempotency_keys_one_subject_check,
    DROP COLUMN endpoint_id,
    ADD CONSTRAINT idempotency_keys_one_subject_check CHECK (num_nonnulls(attempt_id, refund_id, capture_id) = 1);
DROP TABLE webhook_delivery_events;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_messages;
DROP TABLE webhook_endpoint_events;
DROP TABLE webhook_endpoints;
