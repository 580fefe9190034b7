// Package settings registers the configuration that paymentsvc and the
// reconciler share (docs/configuration.md): the database, the provider, and the
// timing of locks and provider calls. The reconciler must read the same
// values as the pods, so both read them through this one registration.
package settings

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/envflag"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/redact"
)

// DefaultDatabaseURL is the local development database.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/payments?sslmode=disable"

// ProviderSetting is one provider of PROVIDERS (or the single default one).
type ProviderSetting struct {
	Name   string
	URL    string
	APIKey string
	// Type is the API the provider speaks (PROVIDER_TYPE_<NAME>): TypeSim
	// (the default) or TypeStripe.
	Type string
}

// The provider types of PROVIDER_TYPE_<NAME>.
const (
	TypeSim    = "sim"
	TypeStripe = "stripe"
)

// DefaultProviderName is the one provider's name when PROVIDERS is unset.
const DefaultProviderName = "sim"

// Shared are the settings both binaries read.
type Shared struct {
	DatabaseURL string
	// DatabaseTimeout bounds every wait on the database (DATABASE_TIMEOUT).
	DatabaseTimeout time.Duration
	// Providers are the providers in their default routing order: PROVIDERS,
	// or the single DefaultProviderName at PROVIDER_URL.
	Providers       []ProviderSetting
	providersErr    error
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
	dbTimeout := s.Duration("DATABASE_TIMEOUT", db.DefaultTimeout, "bound of every wait on the database: a pool connection, a statement, a COMMIT; past it the database counts as unavailable (503) and the connection is discarded")
	provURL := s.URL("PROVIDER_URL", "http://127.0.0.1:9300", "base URL of the payment provider")
	provKey := s.Secret("PROVIDER_API_KEY", "sk_sim", "API key sent to the provider as Authorization: Bearer")
	lockTTL := s.Duration("IDEMPOTENCY_LOCK_TTL", payments.DefaultLockTTL, "how long an in-progress key stays locked to its owner")
	keyTTL := s.Duration("IDEMPOTENCY_KEY_TTL", payments.DefaultKeyTTL, "how long a key and its stored response are kept")
	callTimeout := s.Duration("PROVIDER_CALL_TIMEOUT", provider.DefaultCallTimeout, "timeout of one HTTP call to the provider")
	budget := s.Duration("PROVIDER_RETRY_BUDGET", provider.DefaultRetryBudget, "total time spent retrying one provider call")
	failures := s.Int("PROVIDER_BREAKER_FAILURES", provider.DefaultBreakerFailures, "consecutive failed provider calls that open the breaker")
	cooldown := s.Duration("PROVIDER_BREAKER_COOLDOWN", provider.DefaultBreakerCooldown, "how long the breaker stays open before one trial call")
	providers := s.URL("PROVIDERS", "", "several providers, name=url,… in their default routing order (unset: one provider \"sim\" at PROVIDER_URL); each is called with PROVIDER_API_KEY_<NAME> if set, else PROVIDER_API_KEY, and speaks the API of PROVIDER_TYPE_<NAME>: sim (default) or stripe")
	return func() Shared {
		c := Shared{
			DatabaseURL: *dbURL, DatabaseTimeout: *dbTimeout, LockTTL: *lockTTL, KeyTTL: *keyTTL, CallTimeout: *callTimeout, RetryBudget: *budget,
			BreakerFailures: *failures, BreakerCooldown: *cooldown,
		}
		c.Providers, c.providersErr = parseProviders(*providers, *provURL, *provKey, s.Lookup)
		return c
	}
}

// ProviderVar is the variable that overrides setting prefix for provider
// name: prefix_<NAME>, the name in upper case (PROVIDER_API_KEY_<NAME> here,
// WEBHOOK_SECRETS_<NAME> in internal/server/config.go).
func ProviderVar(prefix, name string) string { return prefix + "_" + strings.ToUpper(name) }

// providerNameRE is what a provider's name may be (it is also a path
// segment of its webhooks and part of variable names).
var providerNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// parseProviders reads PROVIDERS: comma-separated name=url; unset, the one
// provider "sim" at defaultURL. Each provider's API key is
// PROVIDER_API_KEY_<NAME> (name in upper case) if set, else defaultKey.
func parseProviders(raw, defaultURL, defaultKey string, lookup func(string) (string, bool)) ([]ProviderSetting, error) {
	key := func(name string) string {
		if k, ok := lookup(ProviderVar("PROVIDER_API_KEY", name)); ok {
			return k
		}
		return defaultKey
	}
	setting := func(name, u string) (ProviderSetting, error) {
		typ := TypeSim
		if t, ok := lookup(ProviderVar("PROVIDER_TYPE", name)); ok {
			typ = strings.ToLower(strings.TrimSpace(t))
		}
		if typ != TypeSim && typ != TypeStripe {
			return ProviderSetting{}, fmt.Errorf("%s: %q is not %s or %s", ProviderVar("PROVIDER_TYPE", name), typ, TypeSim, TypeStripe)
		}
		return ProviderSetting{Name: name, URL: u, APIKey: key(name), Type: typ}, nil
	}
	if strings.TrimSpace(raw) == "" {
		p, err := setting(DefaultProviderName, defaultURL)
		if err != nil {
			return nil, err
		}
		return []ProviderSetting{p}, nil
	}
	var (
		out  []ProviderSetting
		seen = map[string]bool{}
	)
	for _, item := range strings.Split(raw, ",") {
		name, u, ok := strings.Cut(strings.TrimSpace(item), "=")
		switch {
		case !ok || !providerNameRE.MatchString(name):
			return nil, fmt.Errorf("PROVIDERS: %q is not name=url with a name of [a-z][a-z0-9_]{0,31}", redact.URL(item))
		case seen[name]:
			return nil, fmt.Errorf("PROVIDERS: provider %q is named twice", name)
		}
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			return nil, fmt.Errorf("PROVIDERS: the URL of %q is not an http(s) URL", name)
		}
		seen[name] = true
		p, err := setting(name, u)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Validate refuses shared settings no binary can run safely with.
func (c Shared) Validate() error {
	if c.providersErr != nil {
		return c.providersErr
	}
	if err := c.Payments().Validate(); err != nil {
		return err
	}
	if c.DatabaseTimeout <= 0 {
		return fmt.Errorf("DATABASE_TIMEOUT (%s) must be positive", c.DatabaseTimeout)
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
