-- +goose Up

-- The provider a payment is at is chosen per payment, from its route (the
-- tenant's routing rule for its currency at creation, else the PROVIDERS
-- order), and committed with PENDING before every call: NULL while no
-- provider has been chosen. Existing rows keep the one provider they had.
ALTER TABLE payment_attempts
    ALTER COLUMN provider DROP NOT NULL,
    ALTER COLUMN provider DROP DEFAULT,
    ADD COLUMN route text[] NOT NULL DEFAULT '{}';

-- Each tenant's routing rules, as PUT /v1/routing stored them (validated).
CREATE TABLE routing_rules (
    tenant_id  text        PRIMARY KEY REFERENCES tenants (id),
    rules      jsonb       NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE routing_rules;
UPDATE payment_attempts SET provider = 'sim' WHERE provider IS NULL;
ALTER TABLE payment_attempts
    DROP COLUMN route,
    ALTER COLUMN provider SET DEFAULT 'sim',
    ALTER COLUMN provider SET NOT NULL;
