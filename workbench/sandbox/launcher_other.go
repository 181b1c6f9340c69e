//go:build !amd64

package sandbox

// launcherCode is empty: the launcher exists for x86-64 only, so Run
// fails with ErrLaunch on other architectures.
var launcherCode []byte

const launcherMachine = 0
