package grader

import (
	"os"
	"testing"

	"github.com/agentpen/agentpen/workbench/sandbox"
)

// TestMain lets the uid sandbox re-exec this test binary as its launcher
// (the episode tests run agent code).
func TestMain(m *testing.M) {
	sandbox.RunLauncherIfRequested()
	os.Exit(m.Run())
}
