// Package tenants creates tenants and authenticates their API keys. Only the
// SHA-256 of a key is stored; the key itself is shown once, at creation.
package tenants

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/ids"
)

// ErrUnauthorized is a missing or unknown API key.
var ErrUnauthorized = errors.New("unknown API key")

// Tenant is one merchant.
type Tenant struct {
	ID   string `json:"tenant_id"`
	Name string `json:"name"`
}

// Created is a new tenant with its API key, shown once.
type Created struct {
	Tenant
	APIKey string `json:"api_key"`
}

// Create makes a tenant with a fresh API key.
func Create(ctx context.Context, q db.DBTX, name string) (Created, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return Created{}, errors.New("tenant name must not be empty")
	}
	key := ids.New("sk_", 24)
	sum := sha256.Sum256([]byte(key))
	row, err := db.Q.TenantInsert(ctx, q, db.TenantInsertParams{ID: ids.New("ten_", 12), Name: name, ApiKeySha256: sum[:]})
	if err != nil {
		return Created{}, fmt.Errorf("insert tenant: %w", err)
	}
	return Created{Tenant: Tenant{ID: row.ID, Name: row.Name}, APIKey: key}, nil
}

// Authenticate returns the tenant whose API key is apiKey. The lookup is by
// the key's hash, and the stored hash is compared in constant time.
func Authenticate(ctx context.Context, q db.DBTX, apiKey string) (Tenant, error) {
	if apiKey == "" {
		return Tenant{}, ErrUnauthorized
	}
	return authenticateSum(ctx, q, sha256.Sum256([]byte(apiKey)))
}

// authenticateSum is Authenticate of the key whose SHA-256 is sum.
func authenticateSum(ctx context.Context, q db.DBTX, sum [sha256.Size]byte) (Tenant, error) {
	row, err := db.Q.TenantGetByAPIKeyHash(ctx, q, sum[:])
	if err != nil {
		if errors.Is(db.Translate(err), db.ErrNotFound) {
			return Tenant{}, ErrUnauthorized
		}
		return Tenant{}, err
	}
	if subtle.ConstantTimeCompare(row.ApiKeySha256, sum[:]) != 1 {
		return Tenant{}, ErrUnauthorized
	}
	return Tenant{ID: row.ID, Name: row.Name}, nil
}
