package settings

import "testing"

func TestProviderVarOverridesTheKeyOfOneProvider(t *testing.T) {
	if got := ProviderVar("WEBHOOK_SECRETS", "acq_2"); got != "WEBHOOK_SECRETS_ACQ_2" {
		t.Fatalf("ProviderVar = %q", got)
	}
	env := map[string]string{"PROVIDER_API_KEY_ACQ": "sk_acq"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	ps, err := parseProviders("acq=http://a.example,sim=http://s.example", "http://d.example", "sk_default", lookup)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].APIKey != "sk_acq" || ps[1].APIKey != "sk_default" {
		t.Fatalf("providers = %+v", ps)
	}
}

func TestWithoutProvidersTheOneProviderIsAtProviderURL(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	ps, err := parseProviders("", "http://d.example", "sk_default", none)
	if err != nil {
		t.Fatal(err)
	}
	want := ProviderSetting{Name: DefaultProviderName, URL: "http://d.example", APIKey: "sk_default", Type: TypeSim}
	if len(ps) != 1 || ps[0] != want {
		t.Fatalf("providers = %+v", ps)
	}
}

func TestProviderTypeIsSimUnlessSetPerProvider(t *testing.T) {
	env := map[string]string{"PROVIDER_TYPE_STRIPE": "Stripe"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	ps, err := parseProviders("stripe=https://api.stripe.com,sim=http://s.example", "http://d.example", "sk_default", lookup)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].Type != TypeStripe || ps[1].Type != TypeSim {
		t.Fatalf("providers = %+v", ps)
	}
	env["PROVIDER_TYPE_SIM"] = "adyen"
	if _, err := parseProviders("sim=http://s.example", "", "k", lookup); err == nil || err.Error() != `PROVIDER_TYPE_SIM: "adyen" is not sim or stripe` {
		t.Fatalf("an unknown type: err = %v", err)
	}
	if _, err := parseProviders("", "http://s.example", "k", lookup); err == nil {
		t.Fatal("an unknown type of the default provider must be refused")
	}
}
