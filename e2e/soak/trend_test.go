package soak

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// growth is how much a resource may rise from the middle third of a run to
// its last third before it counts as growing: a fraction of the middle's
// median plus an absolute slack, for the noise of a few requests in flight
// or a garbage collection more or less.
type growth struct {
	fraction float64
	slack    float64
}

// minTrendSamples is the fewest samples a trend is judged on: three thirds
// of at least three.
const minTrendSamples = 9

// median of xs (not empty).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// thirds are the medians of a series' first, middle and last thirds.
type thirds struct{ first, middle, last float64 }

func thirdsOf(xs []float64) thirds {
	n := len(xs) / 3
	return thirds{median(xs[:n]), median(xs[n : len(xs)-n]), median(xs[len(xs)-n:])}
}

// growing reports whether samples (in time order) keep growing: the median
// of the last third exceeds the middle third's by more than g allows. The
// first third is warm-up (pools, caches and the heap filling up) and is
// not judged. A robust test: a spike or a dip in a few samples moves no
// median.
func growing(samples []float64, g growth) (bool, string) {
	if len(samples) < minTrendSamples {
		return false, fmt.Sprintf("%d samples: too few to judge", len(samples))
	}
	th := thirdsOf(samples)
	limit := th.middle*(1+g.fraction) + g.slack
	why := fmt.Sprintf("medians %.0f → %.0f → %.0f (limit %.0f)", th.first, th.middle, th.last, limit)
	return th.last > limit, why
}

func TestGrowing(t *testing.T) {
	t.Parallel()
	g := growth{fraction: 0.2, slack: 5}
	flat := []float64{10, 50, 60, 61, 59, 60, 62, 58, 60, 61, 59, 60}
	leak := []float64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120}
	noisy := []float64{50, 60, 60, 200, 61, 59, 60, 250, 62, 58, 300, 61} // spikes, no trend
	for name, tc := range map[string]struct {
		xs   []float64
		want bool
	}{
		"levels off after warm-up": {flat, false},
		"grows steadily":           {leak, true},
		"spikes are not a trend":   {noisy, false},
		"too few samples":          {leak[:8], false},
	} {
		got, why := growing(tc.xs, g)
		require.Equal(t, tc.want, got, "%s: %s", name, why)
	}
	require.Equal(t, 5.0, median([]float64{9, 1, 5}))
	require.Equal(t, 4.0, median([]float64{9, 1, 5, 3}))
}
