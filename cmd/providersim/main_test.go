package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildBinary builds this command into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "providersim")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// exitCode runs bin with args and env and returns its exit status and output.
func exitCode(t *testing.T, bin string, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exitErr):
		return exitErr.ExitCode(), string(out)
	}
	t.Fatalf("run %v: %v", args, err)
	return 0, ""
}

func TestBinary(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)

	t.Run("help exits 0", func(t *testing.T) {
		t.Parallel()
		code, out := exitCode(t, bin, []string{"SIM_API_KEY=sk_never_printed", "SIM_WEBHOOK_URL=https://u:s3cret@hooks.example/in"}, "-h")
		if code != 0 {
			t.Fatalf("-h exited %d\n%s", code, out)
		}
		if !strings.Contains(out, "--sim-addr") || strings.Contains(out, "sk_never_printed") || strings.Contains(out, "s3cret") {
			t.Fatalf("usage lacks --sim-addr or prints the API key or the webhook URL's password:\n%s", out)
		}
		if !strings.Contains(out, "https://u:***@hooks.example/in") {
			t.Fatalf("usage does not show the webhook URL masked:\n%s", out)
		}
	})
	t.Run("bad flag exits 2", func(t *testing.T) {
		t.Parallel()
		if code, out := exitCode(t, bin, nil, "--bogus"); code != 2 {
			t.Fatalf("--bogus exited %d\n%s", code, out)
		}
	})
	t.Run("bad environment exits 2", func(t *testing.T) {
		t.Parallel()
		if code, out := exitCode(t, bin, []string{"SIM_LATENCY=soon"}); code != 2 {
			t.Fatalf("SIM_LATENCY=soon exited %d\n%s", code, out)
		}
	})
	t.Run("serves until SIGTERM", func(t *testing.T) {
		t.Parallel()
		serveUntilSIGTERM(t, bin)
	})
}

// serveUntilSIGTERM starts the binary on a free port, charges and refunds through it,
// stops it with SIGTERM and checks the exit status and the logs.
func serveUntilSIGTERM(t *testing.T, bin string) {
	const apiKey, secret = "sk_e2e_secret", "whsec_e2e_secret"
	cmd := exec.Command(bin, "--sim-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "SIM_API_KEY="+apiKey, "SIM_WEBHOOK_SECRET="+secret,
		"SIM_STATE_FILE="+filepath.Join(t.TempDir(), "state.json"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	addrc := make(chan string, 1)
	var logs strings.Builder
	var logsMu sync.Mutex
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logsMu.Lock()
			logs.WriteString(sc.Text() + "\n")
			logsMu.Unlock()
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
				addrc <- line.Addr
			}
		}
	}()
	var addr string
	select {
	case addr = <-addrc:
	case <-time.After(10 * time.Second):
		t.Fatal("no listening log line within 10s")
	}

	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/charges",
		strings.NewReader(`{"amount":500,"currency":"USD","payment_method":"pm_card_visa","reference":"pay_e2e"}`))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Idempotency-Key", "k-e2e")
	var charge struct{ ID string }
	post(t, req, &charge)

	req, _ = http.NewRequest(http.MethodPost, "http://"+addr+"/v1/refunds",
		strings.NewReader(`{"charge":"`+charge.ID+`","amount":200,"reference":"rfd_e2e"}`))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Idempotency-Key", "k-e2e-refund")
	var refund struct {
		Charge string
		Amount int64
	}
	post(t, req, &refund)
	if refund.Charge != charge.ID || refund.Amount != 200 {
		t.Fatalf("refund %+v, want 200 of %s", refund, charge.ID)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-readDone
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	logsMu.Lock()
	defer logsMu.Unlock()
	for _, s := range []string{apiKey, secret} {
		if strings.Contains(logs.String(), s) {
			t.Fatalf("logs contain a secret:\n%s", logs.String())
		}
	}
}

// post sends req, wants 201 and decodes the answer into out.
func post(t *testing.T, req *http.Request, out any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("%s status %d, want 201: %s", req.URL.Path, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("%s: %v", req.URL.Path, err)
	}
}
