package leakcheck

import (
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// parked is a goroutine the test starts and ends; its name is what
// Leaked looks for.
func parked(started chan<- struct{}, stop <-chan struct{}) {
	close(started)
	<-stop
}

// park starts parked and returns once it runs.
func park(stop <-chan struct{}) {
	started := make(chan struct{})
	go parked(started, stop)
	<-started
}

// TestLeaked: a goroutine in the named code is reported until it ends; one
// in other code, and the caller's own, never are.
func TestLeaked(t *testing.T) {
	const name = "leakcheck.parked("
	if got := Leaked(0, name); len(got) != 0 {
		t.Fatalf("before: %d leaked: %v", len(got), got)
	}
	stop := make(chan struct{})
	park(stop)
	got := Leaked(50*time.Millisecond, name)
	if len(got) != 1 || !strings.Contains(got[0], name) {
		t.Fatalf("a running goroutine: got %d stacks %v, want its one", len(got), got)
	}
	if got := Leaked(0, "no/such/package."); len(got) != 0 {
		t.Errorf("code nobody runs: %v", got)
	}
	if got := Leaked(0, "leakcheck.TestLeaked("); len(got) != 0 {
		t.Errorf("the test's own goroutine was counted: %v", got)
	}
	close(stop)
	if got := Leaked(untilDone(testenv.Context(t)), name); len(got) != 0 {
		t.Errorf("after it ended: %v", got)
	}
}

// TestAfterTest: the check AfterTest registers fails the test that left a
// goroutine running, and passes one that did not.
func TestAfterTest(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	leaky := &recorder{TB: t}
	afterTest(leaky, func() time.Duration { return 50 * time.Millisecond }, []string{"leakcheck.parked("})
	park(stop)
	leaky.cleanup()
	if !leaky.failed {
		t.Error("a test that left a goroutine running passed")
	}
	clean := &recorder{TB: t}
	afterTest(clean, func() time.Duration { return 50 * time.Millisecond }, []string{"leakcheck.parked_nothing("})
	clean.cleanup()
	if clean.failed {
		t.Error("a test that left nothing running failed")
	}
}

// recorder is a testing.TB whose Cleanup and Errorf are recorded.
type recorder struct {
	testing.TB
	cleanups []func()
	failed   bool
}

func (r *recorder) Helper()                        {}
func (r *recorder) Cleanup(f func())               { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Errorf(format string, a ...any) { r.failed = true }
func (r *recorder) cleanup() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}
