package server

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testenv"
)

// TestMain fails the run if a goroutine of this package outlives the tests
// (it waits for them to end until the run's deadline): whoever starts one
// must wait for it (sessions, readers, Serve).
func TestMain(m *testing.M) {
	start := time.Now()
	code := m.Run()
	if code == 0 {
		if leaked := testenv.LeftGoroutines(start, leakedGoroutines); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines of package server left after the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines lists the goroutines of this package still running,
// "" when none.
func leakedGoroutines() string {
	http.DefaultClient.CloseIdleConnections()
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var leaked []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "workbench/server.") && !strings.Contains(g, "workbench/server.TestMain") && !strings.Contains(g, "leakedGoroutines") {
			leaked = append(leaked, g)
		}
	}
	return strings.Join(leaked, "\n\n")
}
