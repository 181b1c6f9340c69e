// Package browsertest runs agentpen's pages in a real browser for the
// tests: headless Chromium from Debian (chromium-headless-shell, which
// scripts/deps.sh installs; or chromium --headless) driven by chromedp
// over its pipe, with no network but the loopback (every other request
// goes to a proxy that is not there), and a record of what the page did:
// console errors, uncaught exceptions, the browser's own error log lines
// (a CSP violation, a failed load) and every request's URL. Screenshots
// go to the test's artifact directory (go test -artifacts keeps them).
//
// It is test support: only tests import it. A host without Chromium
// skips the test, or fails it in CI (internal/testkit/testenv).
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// Binaries are where the browser is looked for, in order; the variable
// AGENTPEN_TEST_CHROMIUM names another.
var Binaries = []string{"/usr/bin/chromium-headless-shell", "/usr/bin/chromium"}

// Browser is one tab of a headless Chromium that lives until the test
// ends.
type Browser struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	errors   []string
	requests []string
}

// Start starts the browser for t.
func Start(t *testing.T) *Browser {
	t.Helper()
	bin := os.Getenv("AGENTPEN_TEST_CHROMIUM")
	if bin == "" {
		for _, b := range Binaries {
			if _, err := exec.LookPath(b); err == nil {
				bin = b
				break
			}
		}
	}
	if bin == "" {
		testenv.Unavailable(t, "no headless Chromium: scripts/deps.sh installs chromium-headless-shell ("+strings.Join(Binaries, " or ")+")")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox, // as root; the pages under test are our own
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// No network but the loopback: Chromium sends every other request
		// to this proxy, where nothing listens (loopback bypasses proxies).
		chromedp.Flag("proxy-server", "http://127.0.0.1:9"),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &Browser{t: t, ctx: ctx}
	err := chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, a.Description+string(a.Value))
				}
				b.errors = append(b.errors, "console."+string(ev.Type)+": "+strings.Join(parts, " "))
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			text := d.Text
			if d.Exception != nil {
				text += " " + d.Exception.Description
			}
			b.errors = append(b.errors, fmt.Sprintf("exception: %s (%s:%d)", text, d.URL, d.LineNumber))
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError {
				b.errors = append(b.errors, fmt.Sprintf("log (%s): %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		case *network.EventRequestWillBeSent:
			b.requests = append(b.requests, ev.Request.URL)
		}
	})
	if err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	return b
}

// Ctx is the tab's context for chromedp actions.
func (b *Browser) Ctx() context.Context { return b.ctx }

// Errors returns what the page reported as errors so far.
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// Requests returns the URL of every request the page made so far.
func (b *Browser) Requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.requests...)
}

// Screenshot saves the whole page as name.png in the test's artifact
// directory and returns its path.
func (b *Browser) Screenshot(name string) string {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(b.t.ArtifactDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
	return path
}

// Eval evaluates a JavaScript expression in the page and decodes its
// value into T.
func Eval[T any](b *Browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %.80s: %v", expr, err)
	}
	return v
}

// WaitFor polls a JavaScript condition until it is true or timeout
// passes, and reports which.
func WaitFor(b *Browser, cond string, timeout time.Duration) bool {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool]("Boolean("+cond+")"))
		if err == nil && ok {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(25 * time.Millisecond)
	}
}
