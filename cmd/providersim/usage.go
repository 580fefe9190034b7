package main

import (
	"flag"
	"fmt"

	"github.com/acme/paymentsvc/internal/envflag"
)

// usage prints the flags like flag.PrintDefaults, except that the defaults of
// secret settings are hidden: envflag takes defaults from the environment, so
// -h would otherwise print the API key and the webhook secret.
func usage(fs *flag.FlagSet, secretEnvs ...string) {
	secret := map[string]bool{}
	for _, env := range secretEnvs {
		secret[envflag.FlagName(env)] = true
	}
	out := fs.Output()
	fmt.Fprintf(out, "Usage of %s:\n", fs.Name())
	fs.VisitAll(func(f *flag.Flag) {
		def := fmt.Sprintf(" (default %q)", f.DefValue)
		switch {
		case secret[f.Name]:
			def = " (default hidden)"
		case f.DefValue == "" || f.DefValue == "0s":
			def = ""
		}
		kind, text := flag.UnquoteUsage(f)
		fmt.Fprintf(out, "  --%s %s\n    \t%s%s\n", f.Name, kind, text, def)
	})
}
