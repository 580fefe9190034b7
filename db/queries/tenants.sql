-- name: TenantInsert :one
INSERT INTO tenants (id, name, api_key_sha256)
VALUES ($1, $2, $3)
RETURNING *;

-- name: TenantGetByAPIKeyHash :one
SELECT * FROM tenants WHERE api_key_sha256 = $1;
