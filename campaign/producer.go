package campaign

// Producer names the agentpen build that wrote a report: an auditor reads
// which code made a verdict, and a report carries it inside what is
// signed.
type Producer struct {
	// Name is "agentpen".
	Name string `json:"name"`
	// Version is the build's version (a module version, the stamp make
	// build sets, or "devel").
	Version string `json:"version"`
	// Commit is the VCS revision ("unknown" without one).
	Commit string `json:"commit"`
	// Modified says the tree had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
}
