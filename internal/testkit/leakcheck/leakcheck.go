// Package leakcheck fails tests that leave goroutines behind: every
// goroutine whose stack names the code under test (a package path such as
// "workbench/server.", or a library's such as "coder/websocket") must be
// gone when a test, or all of a package's tests, end. Goroutines of other
// code, of running tests and the caller's own are not counted, so the
// check reads only what the package under test started.
//
// A check waits for the goroutines to end until the test's deadline (go
// test -timeout, less testenv's grace): they end a moment after the test,
// later on a loaded machine, and a bound of its own would fail the suite
// by chance.
//
// It is not go.uber.org/goleak, which counts every goroutine of the
// process: a per-test check there also sees parallel tests' goroutines
// and the pools of libraries the test does not own.
package leakcheck

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// Leaked returns the stacks of the goroutines whose stack holds any of
// in, once they are gone or wait has passed. The calling goroutine and
// goroutines running a test function are not counted; idle connections
// of http.DefaultClient are closed first (their goroutines end with them).
func Leaked(wait time.Duration, in ...string) []string {
	http.DefaultClient.CloseIdleConnections()
	deadline := time.Now().Add(wait)
	for {
		leaked := matching(in)
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func matching(in []string) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	// The first stack is the caller's own.
	stacks := strings.Split(string(buf), "\n\n")[1:]
	var out []string
	for _, g := range stacks {
		if strings.Contains(g, "testing.tRunner(") {
			continue
		}
		for _, s := range in {
			if strings.Contains(g, s) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// AfterTest fails t when, at the test's deadline (testenv.Deadline) after
// t and the cleanups registered after this call have ended, goroutines
// whose stack holds any of in are still running. Call it first in the
// test, so that its check runs last.
func AfterTest(t testing.TB, in ...string) {
	t.Helper()
	afterTest(t, func() time.Duration {
		ctx, cancel := testenv.CleanupContext(t)
		defer cancel()
		return untilDone(ctx)
	}, in)
}

// untilDone is the time left until ctx's deadline (forever without one).
func untilDone(ctx interface{ Deadline() (time.Time, bool) }) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d)
	}
	return time.Duration(1<<63 - 1)
}

func afterTest(t testing.TB, wait func() time.Duration, in []string) {
	t.Cleanup(func() {
		if leaked := Leaked(wait(), in...); len(leaked) > 0 {
			t.Errorf("%d goroutines left running after the test:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
		}
	})
}

// Main runs the package's tests and returns the exit code for os.Exit:
// m.Run's, or 1 when they passed but goroutines whose stack holds any of
// in are still running at the run's deadline (testenv.MainDeadline; their
// stacks go to stderr).
func Main(m *testing.M, in ...string) int {
	start := time.Now()
	code := m.Run()
	if code != 0 {
		return code
	}
	wait := time.Duration(1<<63 - 1)
	if d, ok := testenv.MainDeadline(start); ok {
		wait = time.Until(d)
	}
	if leaked := Leaked(wait, in...); len(leaked) > 0 {
		fmt.Fprintf(os.Stderr, "goroutines left running after the tests:\n%s\n", strings.Join(leaked, "\n\n"))
		return 1
	}
	return 0
}
