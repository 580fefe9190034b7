package stripe_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/provider/stripe"
	"github.com/acme/paymentsvc/internal/testkit"
)

// stripeMockBin finds stripe-mock (.ci/run installs it pinned with go
// install) on PATH or in $(go env GOPATH)/bin. Without it the test fails
// when CI is set, and is skipped on a developer's machine.
func stripeMockBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("stripe-mock"); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			gopath = strings.TrimSpace(string(out))
		}
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", "stripe-mock")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	const msg = "stripe-mock not found: go install github.com/stripe/stripe-mock@v0.203.0"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg + "; skipped because CI is unset")
	return ""
}

// startStripeMock runs stripe-mock on a free port until the test ends.
func startStripeMock(t *testing.T) string {
	t.Helper()
	bin := stripeMockBin(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	var out testkit.SyncBuffer
	cmd := exec.Command(bin, "-http-port", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("stripe-mock output:\n%s", out.String())
		}
	})
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/v1/payment_intents")
		if err == nil {
			_ = resp.Body.Close()
			return url
		}
		require.True(t, time.Now().Before(deadline), "stripe-mock did not answer: %v\n%s", err, out.String())
		time.Sleep(50 * time.Millisecond)
	}
}

// accepted fails the test when stripe-mock rejected the request (it answers
// 400 for any parameter Stripe's OpenAPI description does not allow) or
// the answer could not be decoded. stripe-mock returns its fixtures, not
// the outcome of our request, so an answer that is not the status we asked
// for (KindDeclined, KindBadResponse) is still an accepted wire.
func accepted(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	t.Logf("%s: accepted, answered with a fixture: %v", what, err)
	var ce *provider.CallError
	require.True(t, errors.As(err, &ce), "%s: %v", what, err)
	require.NotContains(t, []provider.Kind{provider.KindStatus, provider.KindTransport, provider.KindTimeout}, ce.Kind,
		"%s: stripe-mock rejected the request: %v", what, err)
	if ce.Kind == provider.KindBadResponse {
		require.NotContains(t, err.Error(), "json", "%s: undecodable answer: %v", what, err)
	}
}

func TestConformanceAgainstStripeMock(t *testing.T) {
	url := startStripeMock(t)
	c := stripe.New("stripe", url, "sk_test_123", &http.Client{Timeout: 10 * time.Second})
	ctx := t.Context()

	// The control: stripe-mock does reject what Stripe would.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/payment_intents",
		strings.NewReader("amount=1000&currency=eur&capture_method=later"))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer sk_test_123")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "stripe-mock must reject an invalid capture_method")

	_, err = c.PostCharge(ctx, provider.ChargeRequest{Amount: 1000, Currency: "EUR", PaymentMethod: "pm_card_visa",
		Reference: "pay_conf1", IdempotencyKey: "psvc_pay_conf1"})
	accepted(t, "payment", err)

	ch, err := c.GetCharge(ctx, "pi_123")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(ch.ID, "pi_"), ch.ID)

	_, err = c.PostRefund(ctx, provider.RefundRequest{ChargeID: ch.ID, Amount: 400, Reference: "re_conf1", Reason: "requested_by_customer",
		IdempotencyKey: "psvc_re_conf1"})
	accepted(t, "refund", err)
	_, err = c.PostRefund(ctx, provider.RefundRequest{ChargeID: ch.ID, Reference: "re_conf2", Reason: "customer_changed_mind",
		IdempotencyKey: "psvc_re_conf2"})
	accepted(t, "refund with a reason Stripe does not take", err)

	_, err = c.PostCharge(ctx, provider.ChargeRequest{Amount: 1000, Currency: "EUR", PaymentMethod: "pm_card_visa",
		Reference: "pay_conf2", IdempotencyKey: "psvc_pay_conf2", Manual: true})
	accepted(t, "manual payment", err)
	_, err = c.PostCapture(ctx, provider.CaptureRequest{ChargeID: ch.ID, Amount: 600, Reference: "cap_conf", IdempotencyKey: "psvc_cap_conf"})
	accepted(t, "partial capture", err)
	_, err = c.PostVoid(ctx, provider.VoidRequest{ChargeID: ch.ID, Reference: "void_conf", Reason: "requested_by_customer", IdempotencyKey: "psvc_void_conf"})
	accepted(t, "void", err)

	day := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	page, err := c.ListCharges(ctx, provider.ListQuery{From: day, To: day.AddDate(0, 0, 1), Limit: 100})
	require.NoError(t, err)
	require.NotEmpty(t, page.Data)
	for _, pc := range page.Data {
		require.True(t, strings.HasPrefix(pc.ID, "pi_"), pc.ID)
	}
	_, err = c.ListCharges(ctx, provider.ListQuery{From: day, To: day.AddDate(0, 0, 1), Limit: 100, After: page.Data[0].ID})
	require.NoError(t, err)

	_, err = c.FindRefund(ctx, provider.Lookup{Key: "psvc_re_conf1", Reference: "re_conf1", ChargeID: ch.ID})
	if !errors.Is(err, provider.ErrNotFound) {
		require.NoError(t, err)
	}
	_, err = c.FindCharge(ctx, provider.Lookup{Key: "psvc_pay_conf1", Reference: "pay_conf1", Since: day})
	if !errors.Is(err, provider.ErrNotFound) {
		require.NoError(t, err)
	}
}
