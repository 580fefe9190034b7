package lifecycle

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

var allStatuses = []Status{Created, Pending, Succeeded, Failed, Unknown, Authorized, Canceled}

// TestCanTransitionEveryEdge checks all 49 ordered pairs: exactly the
// eight edges of an operation's machine are allowed, everything else
// (self-loops, moves out of a final status, backwards moves, skipping
// PENDING, AUTHORIZED and CANCELED, which operations do not have) is refused.
func TestCanTransitionEveryEdge(t *testing.T) {
	t.Parallel()
	allowed := map[[2]Status]bool{
		{Created, Pending}:   true,
		{Created, Failed}:    true, // abandoned: never reached the provider
		{Pending, Succeeded}: true,
		{Pending, Failed}:    true,
		{Pending, Unknown}:   true,
		{Pending, Created}:   true, // not_sent: no call reached a provider
		{Unknown, Succeeded}: true,
		{Unknown, Failed}:    true,
	}
	n := 0
	for _, from := range allStatuses {
		for _, to := range allStatuses {
			t.Run(fmt.Sprintf("%s_to_%s", from, to), func(t *testing.T) {
				t.Parallel()
				require.Equal(t, allowed[[2]Status{from, to}], CanTransition(from, to))
			})
			if allowed[[2]Status{from, to}] {
				n++
			}
		}
	}
	require.Equal(t, 8, n)
	// Statuses outside the machine have no edges at all.
	require.False(t, CanTransition("", Pending))
	require.False(t, CanTransition("BOGUS", Succeeded))
	require.False(t, CanTransition(Created, "BOGUS"))
}

// TestManualEdges: a manual payment's machine is an operation's and the
// seven edges of a held authorization, exactly.
func TestManualEdges(t *testing.T) {
	t.Parallel()
	extra := map[[2]Status]bool{
		{Pending, Authorized}:   true,
		{Unknown, Authorized}:   true,
		{Authorized, Succeeded}: true, // captured
		{Authorized, Canceled}:  true, // voided or expired
		{Pending, Canceled}:     true, // read back voided or expired
		{Unknown, Canceled}:     true,
	}
	n := 0
	for _, from := range allStatuses {
		for _, to := range allStatuses {
			want := extra[[2]Status{from, to}] || Operation.CanTransition(from, to)
			require.Equal(t, want, Manual.CanTransition(from, to), "%s→%s", from, to)
			if want {
				n++
			}
		}
	}
	require.Equal(t, 14, n)
	require.True(t, Manual.LegalPath([]Status{Created, Pending, Authorized, Succeeded}))
	require.True(t, Manual.LegalPath([]Status{Created, Pending, Unknown, Authorized, Canceled}))
	require.False(t, Manual.LegalPath([]Status{Created, Pending, Authorized, Failed}), "an authorization is captured or canceled, never failed")
	require.False(t, Manual.LegalPath([]Status{Created, Authorized}), "skips PENDING")
	require.False(t, LegalPath([]Status{Created, Pending, Authorized}), "an automatic payment is never authorized only")
}

func TestFinalAndValid(t *testing.T) {
	t.Parallel()
	final := map[Status]bool{Succeeded: true, Failed: true, Canceled: true}
	for _, s := range allStatuses {
		require.Equal(t, final[s], s.Final(), "%s.Final()", s)
		require.Equal(t, final[s] || s == Authorized, s.Answered(), "%s.Answered()", s)
		require.True(t, s.Valid(), "%s.Valid()", s)
		if s.Final() {
			for _, to := range allStatuses {
				require.False(t, CanTransition(s, to), "a final status has no way out: %s→%s", s, to)
				require.False(t, Manual.CanTransition(s, to), "a final status has no way out: %s→%s", s, to)
			}
		}
	}
	for _, s := range []Status{"", "created", "BOGUS"} {
		require.False(t, s.Valid(), "%q.Valid()", s)
		require.False(t, s.Final(), "%q.Final()", s)
	}
}

func TestLegalPath(t *testing.T) {
	t.Parallel()
	cases := []struct {
		path []Status
		want bool
	}{
		{nil, false},
		{[]Status{}, false},
		{[]Status{Created}, true},
		{[]Status{Created, Pending}, true},
		{[]Status{Created, Pending, Succeeded}, true},
		{[]Status{Created, Pending, Failed}, true},
		{[]Status{Created, Pending, Unknown}, true},
		{[]Status{Created, Pending, Unknown, Succeeded}, true},
		{[]Status{Created, Pending, Unknown, Failed}, true},
		{[]Status{Created, Failed}, true},
		{[]Status{Pending}, false},                                      // must start at CREATED
		{[]Status{Pending, Succeeded}, false},                           // must start at CREATED
		{[]Status{Created, Succeeded}, false},                           // skips PENDING
		{[]Status{Created, Unknown}, false},                             // skips PENDING
		{[]Status{Created, Created}, false},                             // no self-loop
		{[]Status{Created, Pending, Pending}, false},                    // no self-loop
		{[]Status{Created, Pending, Succeeded, Failed}, false},          // out of a final status
		{[]Status{Created, Pending, Failed, Succeeded}, false},          // out of a final status
		{[]Status{Created, Pending, Succeeded, Pending}, false},         // backwards
		{[]Status{Created, Pending, Created, Pending, Succeeded}, true}, // not_sent, then again
		{[]Status{Created, Pending, Unknown, Created}, false},           // UNKNOWN may have charged
		{[]Status{Created, Pending, Unknown, Pending}, false},           // backwards
		{[]Status{Created, Pending, Unknown, Unknown}, false},           // no self-loop
	}
	for _, c := range cases {
		require.Equal(t, c.want, LegalPath(c.path), "LegalPath(%v)", c.path)
	}
}
