package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium; without it the test fails under CI
// (.ci/run installs it: apt-get install -y chromium) and is skipped on a
// developer's machine.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	msg := "the browser tests need Debian's chromium: apt-get install -y chromium"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg + "; skipped because CI is unset")
	return ""
}

// testTimeout bounds each browser test: every wait below is for an element
// or a condition within it, never a fixed sleep.
const testTimeout = 3 * time.Minute

// browser is one headless chromium with a fresh profile, on a page of the
// console at base.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string
}

// newBrowser starts chromium for t (its own --user-data-dir, the debugging
// port chosen by chromium), closed when t ends.
func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	}
	ctx, cancelTimeout := context.WithTimeout(context.Background(), testTimeout)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		cancelTimeout()
	})
	b := &browser{t: t, ctx: bctx, base: base}
	b.do(chromedp.Navigate("about:blank")) // starts the browser
	return b
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// eval runs JavaScript in the page (promises awaited) and decodes its value.
func eval[T any](b *browser, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("browser: evaluate %s: %v", js, err)
	}
	return v
}

// open loads path of the console and waits for its heading.
func (b *browser) open(path string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base+path), chromedp.WaitVisible(chromedp.CSS("h1")))
}

// wait waits until an element with data-testid id is visible.
func (b *browser) wait(id string) {
	b.t.Helper()
	b.do(chromedp.WaitVisible(chromedp.CSS(`[data-testid="` + id + `"]`)))
}

// text is the text of the first element with data-testid id.
func (b *browser) text(id string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`document.querySelector('[data-testid=%q]').textContent.trim()`, id))
}

// count is how many elements carry data-testid id.
func (b *browser) count(id string) int {
	b.t.Helper()
	return eval[int](b, fmt.Sprintf(`document.querySelectorAll('[data-testid=%q]').length`, id))
}

// has reports whether the page has a button whose text is label.
func (b *browser) hasButton(label string) bool {
	b.t.Helper()
	return eval[bool](b, fmt.Sprintf(`[...document.querySelectorAll('button')].some(x => x.textContent.trim() === %q)`, label))
}

// fill types value into the field labelled label (so every field a test
// uses is labelled for screen readers), replacing what it held.
func (b *browser) fill(label, value string) {
	b.t.Helper()
	id := eval[string](b, fmt.Sprintf(`(() => { const l = [...document.querySelectorAll('label')].find(x => x.textContent.trim() === %q);
		const f = l && l.htmlFor && document.getElementById(l.htmlFor);
		if (!f) return "";
		f.value = "";
		return f.id; })()`, label))
	if id == "" {
		b.t.Fatalf("browser: no field labelled %q", label)
	}
	b.do(chromedp.SendKeys(chromedp.CSS("#"+id), value))
}

// press clicks the button whose text is label.
func (b *browser) press(label string) {
	b.t.Helper()
	b.do(chromedp.Click(fmt.Sprintf(`//button[normalize-space()=%q]`, label)))
}

// pressAndLoad presses the button labelled label, whose form loads a new
// page, and waits until that page has loaded. The page before is marked
// first, so none of its elements is ever taken for the answer's.
func (b *browser) pressAndLoad(label string) {
	b.t.Helper()
	eval[bool](b, `(window.psvcStale = true)`)
	b.press(label)
	for {
		loaded, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`!window.psvcStale && document.readyState === "complete"`))
		if err == nil && loaded {
			return
		}
		select {
		case <-b.ctx.Done():
			b.t.Fatalf("browser: the page %q loads did not arrive: %v", label, b.ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// location is the page's path and query.
func (b *browser) location() string {
	b.t.Helper()
	return eval[string](b, `location.pathname + location.search`)
}

// signIn signs in through the form and waits for the overview.
func (b *browser) signIn(email, password string) {
	b.t.Helper()
	b.open("/console/login")
	b.fill("Email", email)
	b.fill("Password", password)
	b.press("Sign in")
	b.wait("count-SUCCEEDED")
}

// post sends a form from the page (fetch, same origin, the session's
// cookie) and returns the answer's status.
func (b *browser) post(path string, fields map[string]string) int {
	b.t.Helper()
	raw, err := json.Marshal(fields)
	if err != nil {
		b.t.Fatal(err)
	}
	return eval[int](b, fmt.Sprintf(`fetch(%q, {method: "POST", body: new URLSearchParams(%s), redirect: "manual"}).then(r => r.status)`, path, raw))
}

// shot saves a screenshot of the whole page as name.png in
// CONSOLE_SCREENSHOTS (relative to the repository), when it is set.
func (b *browser) shot(name string) {
	b.t.Helper()
	dir := os.Getenv("CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(repoRoot(b.t), dir)
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// repoRoot is the directory of go.mod above the test's.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = parent
	}
}

// wait waits for the element that sel (XPath, CSS or text) finds to be visible.
func wait(sel string) chromedp.Action[chromedp.Void] { return chromedp.WaitVisible(sel) }

// clickLink clicks the first element the CSS selector finds.
func clickLink(css string) chromedp.Action[chromedp.Void] { return chromedp.Click(chromedp.CSS(css)) }

// setSelect chooses value in the select with id.
func setSelect(id, value string) chromedp.Action[chromedp.Void] {
	return chromedp.SetValue(chromedp.CSS("#"+id), value)
}

// navigate loads url (of any site).
func navigate(url string) chromedp.Action[chromedp.Void] { return chromedp.Navigate(url) }
