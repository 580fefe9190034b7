// Package proctest runs what the tests talk to: the project's real binaries
// (providersim, paymentsvc, reconciler, paymentsctl) as processes for end-to-end and
// crash tests — built once per test binary, started on free ports, their
// JSON logs read, killed like a crash would — and the provider simulator in
// the test's own process; and it calls them with apiclient, failing the
// test where it cannot go on.
package proctest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// Bins are the paths of the built binaries.
type Bins struct {
	PaymentSvc  string
	ProviderSim string
	Reconciler  string
	PaymentsCtl string
}

var (
	buildOnce sync.Once
	bins      Bins
	buildErr  error
)

// Build compiles the binaries once per test process (with the race detector
// when the tests run with it) and returns their paths.
func Build(t testing.TB) Bins {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "paymentsvc-bins-")
		if err != nil {
			buildErr = err
			return
		}
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		args := []string{"build", "-o", dir + string(os.PathSeparator)}
		if raceEnabled {
			args = append(args, "-race")
		}
		for _, c := range []string{"paymentsvc", "providersim", "reconciler", "paymentsctl"} {
			if m, _ := filepath.Glob(filepath.Join(root, "cmd", c, "*.go")); len(m) > 0 {
				args = append(args, "./cmd/"+c)
			}
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		bins = Bins{
			PaymentSvc:  filepath.Join(dir, "paymentsvc"),
			ProviderSim: filepath.Join(dir, "providersim"),
			Reconciler:  filepath.Join(dir, "reconciler"),
			PaymentsCtl: filepath.Join(dir, "paymentsctl"),
		}
	})
	if buildErr != nil {
		t.Fatalf("proctest: %v", buildErr)
	}
	return bins
}

// moduleRoot finds the directory holding go.mod, from this source file.
func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot locate source")
	}
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("go.mod not found above %s", file)
		}
		dir = parent
	}
}
