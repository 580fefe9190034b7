-- name: TenantInsert :one
INSERT INTO tenants (id, name, api_key_sha256)
VALUES ($1, $2, $3)
RETURNING *;

-- name: TenantGetByAPIKeyHash :one
SELECT * FROM tenants WHERE api_key_sha256 = $1;

-- name: TenantList :many
SELECT id, name, created_at FROM tenants ORDER BY created_at, id LIMIT sqlc.arg(max_rows);

-- TenantInsertOnce is TenantInsert of the console's form creation_key: a
-- key already used inserts nothing (no row).
-- name: TenantInsertOnce :one
INSERT INTO tenants (id, name, api_key_sha256, creation_key)
VALUES ($1, $2, $3, $4)
ON CONFLICT (creation_key) DO NOTHING
RETURNING id, name;

-- name: TenantGetByCreationKey :one
SELECT id, name FROM tenants WHERE creation_key = $1;
