package proctest

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/acme/paymentsvc/internal/childproc"
)

// Process is one running binary with its captured JSON log lines; its
// methods fail the test instead of returning errors where a test cannot go on.
type Process struct {
	*childproc.Proc
	t testing.TB
}

// StartProcess runs bin with args and env (added to childproc.Env()) and
// waits for its "listening" log line. The process is killed when t ends,
// and its logs are printed if t failed.
func StartProcess(t testing.TB, name, bin string, args, env []string) *Process {
	t.Helper()
	p, err := childproc.Start(context.Background(), name, bin, args, env)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("--- logs of %s ---\n%s", p.Name, p.Logs())
		}
	})
	return &Process{Proc: p, t: t}
}

// Restart starts the same binary again (after a crash or a stop).
func (p *Process) Restart() {
	p.t.Helper()
	if err := p.Proc.Restart(context.Background()); err != nil {
		p.t.Fatalf("%v", err)
	}
}

// Run runs bin to completion with env and returns stdout, stderr and the
// exit code. Under E2E_PROVIDER_TYPE=stripe it types the providers env does
// not type itself as a pod's are (a reconciler must speak to the
// simulators the suite started with their Stripe face).
func Run(ctx context.Context, bin string, args, env []string) (stdout, stderr string, code int, err error) {
	if strings.EqualFold(strings.TrimSpace(os.Getenv(ProviderTypeEnv)), ProviderTypeStripe) {
		env = append(slices.Clone(env), providerTypeEnv(env, ProviderTypeStripe)...)
	}
	return childproc.Run(ctx, bin, args, env)
}
