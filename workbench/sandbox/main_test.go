package sandbox

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	RunLauncherIfRequested()
	runHelperIfRequested()
	os.Exit(m.Run())
}
