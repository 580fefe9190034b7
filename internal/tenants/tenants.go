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
	"time"

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
	key, sum := newAPIKey()
	row, err := db.Q.TenantInsert(ctx, q, db.TenantInsertParams{ID: ids.New("ten_", 12), Name: name, ApiKeySha256: sum})
	if err != nil {
		return Created{}, fmt.Errorf("insert tenant: %w", err)
	}
	return Created{Tenant: Tenant{ID: row.ID, Name: row.Name}, APIKey: key}, nil
}

// newAPIKey is a fresh API key and the SHA-256 that is stored of it.
func newAPIKey() (key string, sum []byte) {
	key = ids.New("sk_", 24)
	s := sha256.Sum256([]byte(key))
	return key, s[:]
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

// Listed is a tenant as the console lists it.
type Listed struct {
	Tenant
	CreatedAt time.Time
}

// MaxList bounds the tenants List returns.
const MaxList = 1000

// List returns the tenants, oldest first (at most MaxList).
func List(ctx context.Context, q db.DBTX) ([]Listed, error) {
	rows, err := db.Q.TenantList(ctx, q, MaxList)
	if err != nil {
		return nil, db.Translate(err)
	}
	out := make([]Listed, len(rows))
	for i, r := range rows {
		out[i] = Listed{Tenant: Tenant{ID: r.ID, Name: r.Name}, CreatedAt: r.CreatedAt}
	}
	return out, nil
}

// CreateOnce is Create for a form that may be sent twice: the first call
// with key makes the tenant and returns its API key; a later one makes
// nothing and returns the tenant it made, without a key (replayed true).
func CreateOnce(ctx context.Context, q db.DBTX, name, key string) (c Created, replayed bool, err error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return Created{}, false, errors.New("tenant name must not be empty")
	}
	apiKey, sum := newAPIKey()
	row, err := db.Q.TenantInsertOnce(ctx, q, db.TenantInsertOnceParams{ID: ids.New("ten_", 12), Name: name, ApiKeySha256: sum, CreationKey: &key})
	if err == nil {
		return Created{Tenant: Tenant{ID: row.ID, Name: row.Name}, APIKey: apiKey}, false, nil
	}
	if !errors.Is(db.Translate(err), db.ErrNotFound) {
		return Created{}, false, fmt.Errorf("insert tenant: %w", err)
	}
	made, err := db.Q.TenantGetByCreationKey(ctx, q, &key)
	if err != nil {
		return Created{}, false, fmt.Errorf("tenant of key: %w", db.Translate(err))
	}
	return Created{Tenant: Tenant{ID: made.ID, Name: made.Name}}, true, nil
}
