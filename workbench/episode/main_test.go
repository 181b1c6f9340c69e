package episode

import (
	"os"
	"testing"

	"github.com/agentpen/agentpen/workbench/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.RunLauncherIfRequested()
	os.Exit(m.Run())
}
