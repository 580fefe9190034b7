package proctest

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// Provider types (settings.TypeSim and settings.TypeStripe; proctest does
// not import settings, which the payments package's tests would make a cycle).
const (
	ProviderTypeSim    = "sim"
	ProviderTypeStripe = "stripe"
)

// ProviderTypeEnv names the provider type the e2e suites run on:
// E2E_PROVIDER_TYPE=stripe starts every simulator with SIM_API=stripe and
// every pod with PROVIDER_TYPE_<NAME>=stripe for each of its providers
// (unless a test sets them itself); unset or "sim", the simulator's own API.
const ProviderTypeEnv = "E2E_PROVIDER_TYPE"

// defaultProviderName is the provider a pod has without PROVIDERS
// (settings.DefaultProviderName).
const defaultProviderName = "sim"

// ProviderType is the provider type of E2E_PROVIDER_TYPE (default sim); any
// other value fails the test.
func ProviderType(t testing.TB) string {
	t.Helper()
	v := strings.ToLower(strings.TrimSpace(os.Getenv(ProviderTypeEnv)))
	switch v {
	case "", ProviderTypeSim:
		return ProviderTypeSim
	case ProviderTypeStripe:
		return ProviderTypeStripe
	}
	t.Fatalf("%s=%q: want %s or %s", ProviderTypeEnv, v, ProviderTypeSim, ProviderTypeStripe)
	return ""
}

// hasVar reports whether env sets name.
func hasVar(env []string, name string) bool {
	return slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
}

// lastVar is the value env gives name (the last one wins, as for a process).
func lastVar(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// providerTypeEnv is the PROVIDER_TYPE_<NAME>=typ settings a pod with env
// needs for each of its providers (PROVIDERS, or the default one) that env
// does not type itself. A sim type adds nothing: it is the default.
func providerTypeEnv(env []string, typ string) []string {
	if typ == ProviderTypeSim {
		return nil
	}
	names := []string{defaultProviderName}
	if raw, ok := lastVar(env, "PROVIDERS"); ok && strings.TrimSpace(raw) != "" {
		names = nil
		for item := range strings.SplitSeq(raw, ",") {
			if name, _, ok := strings.Cut(strings.TrimSpace(item), "="); ok {
				names = append(names, strings.TrimSpace(name))
			}
		}
	}
	var out []string
	for _, name := range names {
		v := "PROVIDER_TYPE_" + strings.ToUpper(name)
		if !hasVar(env, v) {
			out = append(out, v+"="+typ)
		}
	}
	return out
}
