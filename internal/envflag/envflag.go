// Package envflag builds a command's configuration from environment variables
// with equal-named lower-case flags overriding them (DATABASE_URL ⇔ --database-url).
package envflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/acme/paymentsvc/internal/redact"
)

// Set is a flag set whose flags take their defaults from the environment.
type Set struct {
	fs      *flag.FlagSet
	errs    []error
	lookup  func(string) (string, bool)
	secrets map[string]bool
	urls    map[string]bool
	header  string
}

// New returns a Set named name that reads the process environment.
func New(name string) *Set {
	return NewWithLookup(name, os.LookupEnv)
}

// NewWithLookup returns a Set that reads variables through lookup (for tests).
func NewWithLookup(name string, lookup func(string) (string, bool)) *Set {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	s := &Set{fs: fs, lookup: lookup, secrets: map[string]bool{}, urls: map[string]bool{}}
	fs.Usage = s.printUsage
	return s
}

// SetUsageHeader sets the text printed above the flags by -h.
func (s *Set) SetUsageHeader(text string) { s.header = text }

// printUsage prints the flags like flag.PrintDefaults, except that the
// defaults of secrets are hidden and those of URLs shown without their
// credentials: defaults come from the environment, so -h would otherwise
// print API keys, signing secrets and passwords.
func (s *Set) printUsage() {
	out := s.fs.Output()
	if s.header != "" {
		fmt.Fprintln(out, strings.TrimRight(s.header, "\n"))
	} else {
		fmt.Fprintf(out, "Usage of %s:\n", s.fs.Name())
	}
	s.fs.VisitAll(func(f *flag.Flag) {
		def := fmt.Sprintf(" (default %q)", f.DefValue)
		switch {
		case s.secrets[f.Name]:
			def = " (default hidden)"
		case s.urls[f.Name] && f.DefValue != "":
			def = fmt.Sprintf(" (default %q)", redact.URL(f.DefValue))
		case f.DefValue == "" || f.DefValue == "0s":
			def = ""
		}
		kind, text := flag.UnquoteUsage(f)
		if _, ok := f.Value.(*onOff); ok {
			kind = "on|off"
		}
		fmt.Fprintf(out, "  --%s %s\n    \t%s%s\n", f.Name, kind, text, def)
	})
}

// Secret registers a string setting whose value is never printed by -h.
func (s *Set) Secret(env, def, usage string) *string {
	s.secrets[FlagName(env)] = true
	return s.String(env, def, usage)
}

// URL registers a URL setting that may carry credentials (user info, a
// token or password query parameter): -h prints it masked by redact.URL.
// Log it through redact.URL too.
func (s *Set) URL(env, def, usage string) *string {
	s.urls[FlagName(env)] = true
	return s.String(env, def, usage)
}

// Lookup reads environment variable name the way the set does, for
// settings whose names are not known in advance (PROVIDER_API_KEY_<NAME>).
func (s *Set) Lookup(name string) (string, bool) {
	v, ok := s.lookup(name)
	return v, ok && v != ""
}

// FlagSet exposes the underlying flag set, for usage text and extra flags.
func (s *Set) FlagSet() *flag.FlagSet { return s.fs }

// FlagName is the flag that overrides env variable name: DATABASE_URL → database-url.
func FlagName(env string) string {
	return strings.ReplaceAll(strings.ToLower(env), "_", "-")
}

func (s *Set) env(name, def string) string {
	if v, ok := s.lookup(name); ok && v != "" {
		return v
	}
	return def
}

func (s *Set) usage(env, usage string) string {
	return fmt.Sprintf("%s (env %s)", usage, env)
}

// String registers a string setting.
func (s *Set) String(env, def, usage string) *string {
	return s.fs.String(FlagName(env), s.env(env, def), s.usage(env, usage))
}

// Duration registers a duration setting; a malformed environment value is reported by Parse.
func (s *Set) Duration(env string, def time.Duration, usage string) *time.Duration {
	v := def
	if raw := s.env(env, ""); raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s: %w", env, err))
		} else {
			v = d
		}
	}
	return s.fs.Duration(FlagName(env), v, s.usage(env, usage))
}

// Int registers an integer setting; a malformed environment value is reported by Parse.
func (s *Set) Int(env string, def int, usage string) *int {
	v := def
	if raw := s.env(env, ""); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s: %w", env, err))
		} else {
			v = n
		}
	}
	return s.fs.Int(FlagName(env), v, s.usage(env, usage))
}

// Float registers a floating-point setting; a malformed environment value
// (or NaN, or an infinity) is reported by Parse. The flag itself takes what
// strconv.ParseFloat takes: callers check the range.
func (s *Set) Float(env string, def float64, usage string) *float64 {
	v := def
	if raw := s.env(env, ""); raw != "" {
		f, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			s.errs = append(s.errs, fmt.Errorf("%s: invalid number %q", env, raw))
		} else {
			v = f
		}
	}
	return s.fs.Float64(FlagName(env), v, s.usage(env, usage))
}

// Bool registers an on/off setting: on, true, 1, yes and off, false, 0, no.
// -h shows its value as on or off, the words the documentation uses.
func (s *Set) Bool(env string, def bool, usage string) *bool {
	v := onOff(def)
	if raw := s.env(env, ""); raw != "" {
		b, err := ParseBool(raw)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s: %w", env, err))
		} else {
			v = onOff(b)
		}
	}
	s.fs.Var(&v, FlagName(env), s.usage(env, usage))
	return (*bool)(&v)
}

// onOff is a flag.Value that parses with ParseBool and prints on or off.
// Unlike the flag package's bools, it takes a value (--outbox-relay off).
type onOff bool

func (b *onOff) String() string {
	if b != nil && *b {
		return "on"
	}
	return "off"
}

func (b *onOff) Set(raw string) error {
	v, err := ParseBool(raw)
	if err != nil {
		return err
	}
	*b = onOff(v)
	return nil
}

// ParseBool accepts on/off in addition to strconv.ParseBool's forms.
func ParseBool(raw string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(raw)) {
	case "on", "yes", "y", "true", "1", "t":
		return true, nil
	case "off", "no", "n", "false", "0", "f":
		return false, nil
	}
	return false, fmt.Errorf("invalid boolean %q (want on or off)", raw)
}

// ErrHelp is returned by Parse when -h or --help was asked for; the caller exits 0.
var ErrHelp = flag.ErrHelp

// Parse parses args. It returns ErrHelp for -h (usage already printed), or an
// error for a bad flag or a malformed environment value (the caller exits 2).
func (s *Set) Parse(args []string, stderr io.Writer) error {
	s.fs.SetOutput(stderr)
	if err := s.fs.Parse(args); err != nil {
		return err
	}
	if len(s.errs) > 0 {
		err := errors.Join(s.errs...)
		fmt.Fprintf(stderr, "invalid environment: %v\n", err)
		return err
	}
	return nil
}

// ExitCode maps a Parse error to the exit status every binary uses: 0 for help, 2 otherwise.
func ExitCode(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}
