package episode

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// extraSharedDir is a world-writable directory this test run made outside
// the usual shared tmp directories (in /run, a tmpfs in the workspace
// container), before any episode started: episode code must find it
// read-only, and nothing of an episode may be left in it. Empty when it
// could not be made.
var extraSharedDir string

func TestMain(m *testing.M) {
	if os.Geteuid() == 0 {
		d := filepath.Join("/run", fmt.Sprintf("wb-episode-test-%d", os.Getpid()))
		if os.Mkdir(d, 0o755) == nil && os.Chmod(d, 0o1777) == nil {
			extraSharedDir = d
		}
	}
	code := m.Run()
	if extraSharedDir != "" {
		os.RemoveAll(extraSharedDir)
	}
	os.Exit(code)
}
