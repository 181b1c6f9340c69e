package server

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run if a goroutine of this package outlives the tests:
// whoever starts one must wait for it (sessions, readers, Serve).
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := leakedGoroutines(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines of package server left after the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

func leakedGoroutines(wait time.Duration) string {
	http.DefaultClient.CloseIdleConnections()
	deadline := time.Now().Add(wait)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "workbench/server.") && !strings.Contains(g, "workbench/server.TestMain") && !strings.Contains(g, "leakedGoroutines") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
