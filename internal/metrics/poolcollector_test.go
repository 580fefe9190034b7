package metrics

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// poolConnections gathers Registry and returns the pool gauge by state.
func poolConnections(t *testing.T) map[string]float64 {
	t.Helper()
	fams, err := Registry.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "paymentsvc_database_connections" {
			continue
		}
		for _, m := range f.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return out
}

// A pool registered replaces the one before (a process that serves twice),
// its connections are read at each scrape, and unregistering either, in
// any order, neither panics nor removes the other.
func TestRegisterPool(t *testing.T) {
	first := RegisterPool(func() PoolStat { return PoolStat{Total: 1, Max: 16} })
	second := RegisterPool(func() PoolStat { return PoolStat{Total: 3, Idle: 1, Acquired: 2, Max: 16} })
	require.Equal(t, map[string]float64{"total": 3, "idle": 1, "acquired": 2, "constructing": 0, "max": 16}, poolConnections(t))
	first() // replaced already: does nothing
	require.Equal(t, 3.0, poolConnections(t)["total"])
	second()
	require.Empty(t, poolConnections(t))
}
