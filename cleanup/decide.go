package cleanup

import (
	"fmt"
	"path/filepath"
	"regexp"

	"github.com/agentpen/agentpen/campaign"
)

// Action is what Decide says to do with one journalled resource.
type Action string

// The actions.
const (
	// Remove: the resource exists and its labels prove it is the one the
	// journal's intent describes.
	Remove Action = "remove"
	// AlreadyGone: the daemon says the id does not exist (or the directory
	// is absent); there is nothing to remove.
	AlreadyGone Action = "already_gone"
	// NotOurs: something answers to the id but its labels do not prove
	// ownership; it is left alone.
	NotOurs Action = "not_ours"
	// Refuse: the evidence is missing or malformed (no recorded id, an
	// unanswered inspect, a directory of the wrong shape); nothing is done.
	Refuse Action = "refuse"
)

// State is what an observation found.
type State int

// The observation states.
const (
	// Unknown: the daemon (or the file system) did not answer
	// definitively. The zero value, so a missing observation fails closed.
	Unknown State = iota
	// Present: the resource answered to the id.
	Present
	// Absent: the daemon said no such resource (NotFound).
	Absent
)

// Observation is what the adapter saw of one journalled resource just
// before deciding.
type Observation struct {
	// State says whether the resource answered; Unknown fails closed.
	State State
	// ID is the id the daemon reported (containers and networks).
	ID string
	// Labels are the labels the daemon reported.
	Labels map[string]string
	// Version is the runtime's version of the resource as observed (a
	// Kubernetes object's resourceVersion), "" where the runtime keeps
	// none: a removal with a precondition removes only that version.
	Version string
	// RunRoot is the directory workspace run directories must live in, two
	// levels up (<RunRoot>/<campaign key>/agent-<24 hex>); directories only.
	RunRoot string
	// Err says why the State is Unknown (for the reason only).
	Err string
	// Diverted says why a directory's path does not lead to a directory
	// agentpen made (a link planted on it, never followed): something is
	// there, and it is not ours.
	Diverted string
}

// Decision is Decide's answer: an action and the reason for it.
type Decision struct {
	Action Action
	Reason string
}

// Decide says what to do with the journalled resource r given what was
// observed of it. It fails closed: a resource without a recorded id, an
// observation that is not definitive, labels that do not prove ownership
// and directories not shaped like a workspace run directory are never
// removed.
func Decide(r campaign.Resource, obs Observation) Decision {
	if r.ID == "" {
		return Decision{Refuse, "no id was recorded for this intent"}
	}
	if !r.Kind.Known() {
		return Decision{Refuse, fmt.Sprintf("unknown kind %q", r.Kind)}
	}
	if r.Kind == campaign.KindDir {
		if !RunDirShape(obs.RunRoot, r.ID) {
			return Decision{Refuse, fmt.Sprintf("%q is not a workspace run directory under %q", r.ID, obs.RunRoot)}
		}
	}
	switch obs.State {
	case Absent:
		return Decision{AlreadyGone, "the daemon reports no such " + string(r.Kind)}
	case Present:
	default:
		reason := "no definitive answer"
		if obs.Err != "" {
			reason += ": " + obs.Err
		}
		return Decision{Refuse, reason}
	}
	switch r.Kind {
	case campaign.KindDir:
		if obs.Diverted != "" {
			return Decision{NotOurs, obs.Diverted}
		}
		return Decision{Remove, "a workspace run directory of this campaign"}
	default:
		// Every kind but a directory carries its ownership labels.
		if obs.ID != r.ID {
			return Decision{NotOurs, fmt.Sprintf("the daemon answered with id %q, not the journalled %q", obs.ID, r.ID)}
		}
		if !campaign.OwnedBy(obs.Labels, r.Labels) {
			return Decision{NotOurs, "its io.agentpen labels do not match the journal's intent"}
		}
		return Decision{Remove, "journalled id with matching ownership labels"}
	}
}

var runDirBase = regexp.MustCompile(`^(agent-[0-9a-f]{24}|grader)$`)

// RunDirShape reports whether path has the exact shape of a directory
// agentpen makes under root for a bring-up: a workspace's run directory or
// the grader's socket directory (<root>/<run root>/agent-<24 hex> or
// <root>/<run root>/grader, absolute and clean), so a journal entry,
// however it was written, never makes agentpen remove anything else.
func RunDirShape(root, path string) bool {
	if root == "" || !filepath.IsAbs(root) || filepath.Clean(root) != root {
		return false
	}
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return false
	}
	key := filepath.Dir(path)
	return filepath.Dir(key) == root && runDirBase.MatchString(filepath.Base(path)) &&
		filepath.Base(key) != "." && filepath.Base(key) != ".."
}
