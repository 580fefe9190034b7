package envflag

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// env is a lookup over a fixed environment.
func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// An on/off setting reads every spelling of ParseBool from the environment,
// a flag overrides it, and -h shows its current value as on or off (the
// words the documentation uses), never as true or false.
func TestBool(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		args []string
		want bool
		help string
	}{
		{nil, nil, true, `--relay on|off`},
		{map[string]string{"RELAY": "off"}, nil, false, `(env RELAY) (default "off")`},
		{map[string]string{"RELAY": "No"}, nil, false, `(env RELAY) (default "off")`},
		{map[string]string{"RELAY": "0"}, nil, false, `(env RELAY) (default "off")`},
		{map[string]string{"RELAY": "TRUE"}, nil, true, `(env RELAY) (default "on")`},
		{map[string]string{"RELAY": "off"}, []string{"--relay", "yes"}, true, `(env RELAY) (default "off")`},
		{nil, []string{"--relay=f"}, false, `(env RELAY) (default "on")`},
	} {
		s := NewWithLookup("test", env(c.env))
		relay := s.Bool("RELAY", true, "publish events")
		var out bytes.Buffer
		require.NoError(t, s.Parse(c.args, &out), "%v %v", c.env, c.args)
		require.Equal(t, c.want, *relay, "%v %v", c.env, c.args)

		help := NewWithLookup("test", env(c.env))
		help.Bool("RELAY", true, "publish events")
		out.Reset()
		require.ErrorIs(t, help.Parse([]string{"-h"}, &out), ErrHelp)
		require.Contains(t, out.String(), c.help, "%v", c.env)
		require.NotContains(t, out.String(), "true")
	}
}

// A malformed on/off value is refused, from the environment and as a flag.
func TestBoolRefusesOtherWords(t *testing.T) {
	t.Parallel()
	s := NewWithLookup("test", env(map[string]string{"RELAY": "maybe"}))
	s.Bool("RELAY", true, "publish events")
	var out bytes.Buffer
	require.ErrorContains(t, s.Parse(nil, &out), `RELAY: invalid boolean "maybe"`)

	s = NewWithLookup("test", env(nil))
	s.Bool("RELAY", true, "publish events")
	require.ErrorContains(t, s.Parse([]string{"--relay", "2"}, &out), `invalid boolean "2"`)
}
