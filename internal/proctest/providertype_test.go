package proctest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProviderTypeEnv(t *testing.T) {
	require.Nil(t, providerTypeEnv([]string{"PROVIDERS=a=http://x"}, ProviderTypeSim), "sim is the default")
	require.Equal(t, []string{"PROVIDER_TYPE_SIM=stripe"}, providerTypeEnv(nil, ProviderTypeStripe))
	require.Equal(t, []string{"PROVIDER_TYPE_B=stripe"},
		providerTypeEnv([]string{"PROVIDERS=a=http://x, b=http://y", "PROVIDER_TYPE_A=sim"}, ProviderTypeStripe),
		"a provider typed by the test keeps its type")
}

func TestProviderTypeFromTheEnvironment(t *testing.T) {
	t.Setenv(ProviderTypeEnv, "")
	require.Equal(t, ProviderTypeSim, ProviderType(t))
	t.Setenv(ProviderTypeEnv, "Stripe")
	require.Equal(t, ProviderTypeStripe, ProviderType(t))
}
