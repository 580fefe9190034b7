// Package settings registers the configuration that paymentsvc and the
// reconciler share (docs/configuration.md): the database, the provider, and the
// timing of locks and provider calls. The reconciler must read the same
// values as the pods, so both read them through this one registration.
package settings

import (
	"errors"
	"time"

	"github.com/acme/paymentsvc/internal/envflag"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/provider"
)

// DefaultDatabaseURL is the local development database.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/payments?sslmode=disable"

// Shared are the settings both binaries read.
type Shared struct {
	DatabaseURL     string
	ProviderURL     string
	ProviderAPIKey  string
	LockTTL         time.Duration
	KeyTTL          time.Duration
	CallTimeout     time.Duration
	RetryBudget     time.Duration
	BreakerFailures int
	BreakerCooldown time.Duration
}

// Register adds the shared settings to s (the API key as a secret that -h
// does not print, the URLs as URLs it prints without credentials) and returns a function that yields their parsed values.
// databaseUsage describes DATABASE_URL for the binary at hand.
func Register(s *envflag.Set, databaseUsage string) func() Shared {
	dbURL := s.URL("DATABASE_URL", DefaultDatabaseURL, databaseUsage)
	provURL := s.URL("PROVIDER_URL", "http://127.0.0.1:9300", "base URL of the payment provider")
	provKey := s.Secret("PROVIDER_API_KEY", "sk_sim", "API key sent to the provider as Authorization: Bearer")
	lockTTL := s.Duration("IDEMPOTENCY_LOCK_TTL", payments.DefaultLockTTL, "how long an in-progress key stays locked to its owner")
	keyTTL := s.Duration("IDEMPOTENCY_KEY_TTL", payments.DefaultKeyTTL, "how long a key and its stored response are kept")
	callTimeout := s.Duration("PROVIDER_CALL_TIMEOUT", provider.DefaultCallTimeout, "timeout of one HTTP call to the provider")
	budget := s.Duration("PROVIDER_RETRY_BUDGET", provider.DefaultRetryBudget, "total time spent retrying one provider call")
	failures := s.Int("PROVIDER_BREAKER_FAILURES", provider.DefaultBreakerFailures, "consecutive failed provider calls that open the breaker")
	cooldown := s.Duration("PROVIDER_BREAKER_COOLDOWN", provider.DefaultBreakerCooldown, "how long the breaker stays open before one trial call")
	return func() Shared {
		return Shared{
			DatabaseURL: *dbURL, ProviderURL: *provURL, ProviderAPIKey: *provKey,
			LockTTL: *lockTTL, KeyTTL: *keyTTL, CallTimeout: *callTimeout, RetryBudget: *budget,
			BreakerFailures: *failures, BreakerCooldown: *cooldown,
		}
	}
}

// Validate refuses shared settings no binary can run safely with.
func (c Shared) Validate() error {
	if err := c.Payments().Validate(); err != nil {
		return err
	}
	if c.BreakerFailures < 1 || c.BreakerCooldown <= 0 {
		return errors.New("PROVIDER_BREAKER_FAILURES must be at least 1 and PROVIDER_BREAKER_COOLDOWN positive")
	}
	return c.Provider().Validate()
}

// Payments is the create path's and Sync's part of the settings.
func (c Shared) Payments() payments.Config {
	return payments.Config{
		LockTTL: c.LockTTL, KeyTTL: c.KeyTTL, CallTimeout: c.CallTimeout,
		RetryBudget: c.RetryBudget, BreakerCooldown: c.BreakerCooldown,
	}
}

// Provider is the resilient provider wrapper's part of the settings.
func (c Shared) Provider() provider.Config {
	return provider.Config{
		CallTimeout: c.CallTimeout, RetryBudget: c.RetryBudget,
		BreakerFailures: uint32(c.BreakerFailures), BreakerCooldown: c.BreakerCooldown,
	}
}
