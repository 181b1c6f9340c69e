package cli

import (
	"runtime"
	"runtime/debug"
)

// Version is what a binary knows of its own build.
type Version struct {
	// Version is the module version, or what the build stamped with
	// -ldflags "-X ..." (Stamp), or "devel".
	Version string `json:"version"`
	// Commit is the VCS revision the build recorded ("unknown" without
	// one); Modified says the tree had uncommitted changes.
	Commit    string `json:"commit"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
	// DockerSDK is the version of github.com/docker/docker linked in ("" in
	// a binary without it).
	DockerSDK string `json:"docker_sdk,omitempty"`
}

// Stamp and StampCommit are set at link time by make build (-X: git
// describe and the commit); empty otherwise, when the build's own VCS
// information (if any) is used.
var Stamp, StampCommit string

// ReadVersion reads the running binary's build information.
func ReadVersion() Version {
	v := Version{Version: "devel", Commit: "unknown", GoVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if ok {
		if mv := info.Main.Version; mv != "" && mv != "(devel)" {
			v.Version = mv
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
		for _, d := range info.Deps {
			if d.Path == "github.com/docker/docker" {
				v.DockerSDK = d.Version
			}
		}
	}
	if Stamp != "" {
		v.Version = Stamp
	}
	if StampCommit != "" {
		v.Commit = StampCommit
	}
	return v
}
