package proctest

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// PodOptions configure a paymentsvc process.
type PodOptions struct {
	Name        string // for logs; default "paymentsvc"
	DatabaseURL string
	ProviderURL string
	Env         []string // extra settings, e.g. "PAYMENTSVC_FAILPOINT=after_provider_call"
	// ProviderType is the API its providers speak (ProviderTypeSim or
	// ProviderTypeStripe); empty: ProviderType(t), from E2E_PROVIDER_TYPE.
	// A provider that Env types with PROVIDER_TYPE_<NAME> keeps its type.
	ProviderType string
}

// StartPod runs paymentsvc serve on a free port, without the operator
// console (opt.Env may set CONSOLE_ADDR). The outbox relay is off
// unless opt.Env turns it on, so tests that do not need NATS do not use it,
// and so is the drain delay (SHUTDOWN_DRAIN_DELAY=0s), so that stopping a
// pod takes no longer than its requests do; opt.Env may set either.
func StartPod(t testing.TB, opt PodOptions) *Process {
	t.Helper()
	b := Build(t)
	name := opt.Name
	if name == "" {
		name = "paymentsvc"
	}
	env := []string{
		"HTTP_ADDR=127.0.0.1:0",
		"CONSOLE_ADDR=off",
		"DATABASE_URL=" + opt.DatabaseURL,
		"PROVIDER_URL=" + opt.ProviderURL,
		"OUTBOX_RELAY=off",
		"SHUTDOWN_DRAIN_DELAY=0s",
	}
	env = append(env, opt.Env...)
	typ := opt.ProviderType
	if typ == "" {
		typ = ProviderType(t)
	}
	env = append(env, providerTypeEnv(env, typ)...)
	return StartProcess(t, name, b.PaymentSvc, []string{"serve"}, env)
}

// Tenant is a tenant made with `paymentsvc tenant create`.
type Tenant struct {
	ID     string `json:"tenant_id"`
	Name   string `json:"name"`
	APIKey string `json:"api_key"`
}

// CreateTenant runs `paymentsvc tenant create` against databaseURL.
func CreateTenant(t testing.TB, databaseURL, name string) Tenant {
	t.Helper()
	b := Build(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, errOut, code, err := Run(ctx, b.PaymentSvc, []string{"tenant", "create", "--name", name}, []string{"DATABASE_URL=" + databaseURL})
	if err != nil || code != 0 {
		t.Fatalf("tenant create: code %d err %v\n%s", code, err, errOut)
	}
	var tn Tenant
	if err := json.Unmarshal([]byte(out), &tn); err != nil {
		t.Fatalf("tenant create printed %q: %v", out, err)
	}
	return tn
}
