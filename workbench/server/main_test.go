package server

import (
	"os"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/leakcheck"
)

// TestMain fails the run if a goroutine of this package outlives the tests
// (it waits for them to end until the run's deadline): whoever starts one
// must wait for it (sessions, readers, Serve).
func TestMain(m *testing.M) {
	os.Exit(leakcheck.Main(m, "workbench/server."))
}
