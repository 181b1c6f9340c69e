package kuberig_test

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/kuberig"
)

// recorder is a testing.TB that records how a helper ended it: Fatal and
// Skip end the calling goroutine, as the testing package's do.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatal(args ...any) {
	r.fatal = fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Skip(args ...any) {
	r.skip = fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recorder) Skipf(format string, args ...any) {
	r.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recorder) SkipNow() {
	r.skip = "SkipNow"
	runtime.Goexit()
}

// TestConfigFailsWithoutCluster: a cluster test whose KUBECONFIG is
// unset, or names no file, fails (saying how to run it), never skips.
func TestConfigFailsWithoutCluster(t *testing.T) {
	for _, tc := range []struct{ name, kubeconfig, want string }{
		{"unset", "", "make kube-test"},
		{"missing file", filepath.Join(t.TempDir(), "kubeconfig"), "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.kubeconfig)
			r := &recorder{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				kuberig.Config(r)
			}()
			<-done
			if r.skip != "" || !strings.Contains(r.fatal, tc.want) {
				t.Errorf("Config with KUBECONFIG %q: fatal %q, skip %q; want a failure naming %q", tc.kubeconfig, r.fatal, r.skip, tc.want)
			}
		})
	}
}
