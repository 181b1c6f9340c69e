package cleanup

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentpen/agentpen/campaign"
)

// Schema is the schema string of a cleanup report.
const Schema = "agentpen.cleanup.v1"

// Status is a cleanup report's verdict.
type Status string

// The verdicts.
const (
	// Verified: every expected resource is confirmed absent by the daemon
	// and nothing carrying the campaign's labels remains.
	Verified Status = "verified"
	// Failed: anything else, including evidence that could not be had.
	Failed Status = "failed"
)

// Outcome is what happened to one journalled resource during a cleanup.
type Outcome struct {
	Resource campaign.Resource
	// Decision is Decide's answer before acting.
	Decision Decision
	// Error is why the removal call failed ("" when it succeeded or was
	// not made).
	Error string
	// After is the re-inspection after acting (for an already-gone
	// resource, the confirming one).
	After Observation
}

// Unresolved is an intent whose create outcome was never recorded and that
// could not be resolved by name and instance label.
type Unresolved struct {
	Resource campaign.Resource
	Reason   string
}

// Found is a resource the daemon listed by label.
type Found struct {
	// Kind is "container" or "network".
	Kind campaign.Kind `json:"kind"`
	// ID is the daemon's id of it.
	ID string `json:"id"`
	// Name is its name.
	Name string `json:"name"`
	// Labels are its labels.
	Labels map[string]string `json:"labels,omitempty"`
}

// Input is everything a cleanup report is computed from: the adapter
// gathers it, Build judges it.
type Input struct {
	CampaignID  string
	Generations []campaign.Generation
	// Outcomes are the journalled resources with an id (including intents
	// resolved by name), each observed, decided, acted on and re-inspected.
	Outcomes   []Outcome
	Unresolved []Unresolved
	// Labelled is everything the daemon listed with the campaign's label
	// after the removals; ListError says the listing failed.
	Labelled  []Found
	ListError string
	// ReadOnly marks a verification that removes nothing (agentpen cleanup
	// verify): outcomes carry only their observation.
	ReadOnly bool
	Started  time.Time
	Finished time.Time
	// Phases are durations by phase name (resolve, remove, verify).
	Phases map[string]time.Duration
	// Producer is the agentpen build making the report.
	Producer campaign.Producer
}

// Entry names one resource in a report.
type Entry struct {
	// Kind is "container", "network" or "dir".
	Kind campaign.Kind `json:"kind"`
	// Role is its role in the campaign (server, workspace, network).
	Role string `json:"role,omitempty"`
	// Name is the name it was created under.
	Name string `json:"name,omitempty"`
	// ID is the id the daemon returned (a directory's path).
	ID string `json:"id,omitempty"`
	// Gen is the generation that created it.
	Gen int `json:"generation,omitempty"`
	// Reason says why it is in this list.
	Reason string `json:"reason,omitempty"`
}

// Evidence is why a removed resource was agentpen's: the reserved labels
// the daemon reported that matched the journal's intent.
type Evidence struct {
	// ID is the resource removed.
	ID string `json:"id"`
	// Kind is its kind.
	Kind campaign.Kind `json:"kind"`
	// Labels are the reserved labels that matched the journal's intent.
	Labels map[string]string `json:"labels"`
}

// Check is one verification: what was observed, what was expected, and
// whether they agree.
type Check struct {
	// Observed is what the daemon showed.
	Observed any `json:"observed"`
	// Expected is what the journal says it must be.
	Expected any `json:"expected"`
	// Pass is true when they agree.
	Pass bool `json:"pass"`
}

// GenerationInfo names a generation and its instance nonce.
type GenerationInfo struct {
	// N is the generation's number.
	N int `json:"n"`
	// Instance is its instance nonce.
	Instance string `json:"instance"`
}

// Timings are a cleanup's durations in milliseconds.
type Timings struct {
	// Started is when the cleanup began.
	Started time.Time `json:"started"`
	// Finished is when it ended.
	Finished time.Time `json:"finished"`
	// TotalMS is its duration.
	TotalMS int64 `json:"total_ms"`
	// PhasesMS are the durations of its phases (resolve, remove, verify).
	PhasesMS map[string]int64 `json:"phases_ms,omitempty"`
}

// Report is the cleanup report (schema agentpen.cleanup.v1) that agentpen
// down (and a rollback, and agentpen orphans --remove) writes as a new
// file of the campaign (cleanup-<generation>-<n>.json, never rewritten),
// signed beside it. It speaks for one generation: Generation and Instance
// name the latest generation of the journal when it was made, WrittenAt
// when.
type Report struct {
	// Schema is "agentpen.cleanup.v1".
	Schema string `json:"schema"`
	// CampaignID is the campaign removed (or verified).
	CampaignID string `json:"campaign_id"`
	// Generation and Instance are the generation the report speaks for:
	// the journal's latest when it was made (0 and "" for a journal
	// without one).
	Generation int `json:"generation"`
	// Instance is that generation's instance nonce.
	Instance string `json:"instance"`
	// Producer is the agentpen build that made the report.
	Producer campaign.Producer `json:"producer"`
	// WrittenAt is when the report was made (its verification's end).
	WrittenAt time.Time `json:"written_at"`
	// Status is "verified" only when everything the journal records is
	// confirmed gone and nothing carries the campaign's labels; "failed"
	// otherwise.
	Status Status `json:"status"`
	// OK is Status == "verified".
	OK bool `json:"ok"`
	// ReadOnly marks a verification that removed nothing (agentpen
	// cleanup verify).
	ReadOnly bool `json:"read_only,omitempty"`
	// FailedChecks are the names of the checks that failed, sorted.
	FailedChecks []string `json:"failed_checks"`
	// Generations are every generation the journal records.
	Generations []GenerationInfo `json:"generations"`
	// Expected are the resources the journal says were created.
	Expected []Entry `json:"expected"`
	// Removed are the resources removed, by id.
	Removed []Entry `json:"removed"`
	// AlreadyGone are the resources the daemon confirmed absent before
	// any removal.
	AlreadyGone []Entry `json:"already_gone"`
	// LeftAlone are the resources not removed (their labels did not
	// prove ownership, or their removal failed), each with why.
	LeftAlone []Entry `json:"left_alone"`
	// Unexpected are resources the daemon lists with the campaign's
	// label that the journal does not account for (never removed).
	Unexpected []Found `json:"unexpected"`
	// Networks are the networks removed.
	Networks []string `json:"networks"`
	// RunDirs are the run directories removed.
	RunDirs []string `json:"run_dirs"`
	// Ownership is the evidence each removal was of the campaign's.
	Ownership []Evidence `json:"ownership"`
	// Checks are the verifications by name.
	Checks map[string]Check `json:"checks"`
	// Timings are how long the cleanup took.
	Timings Timings `json:"timings"`
}

// Marshal is the report as written to its file: indented JSON and a
// newline.
func (r *Report) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Build judges a cleanup. It fails closed: a resource is counted gone only
// when its re-inspection says absent; one left alone, an intent left
// unresolved, an id journalled twice, anything still carrying the
// campaign's labels, and a label listing that failed each fail a check,
// and any failed check makes the status Failed.
func Build(in Input) Report {
	r := Report{
		Schema: Schema, CampaignID: in.CampaignID, ReadOnly: in.ReadOnly, Producer: in.Producer,
		FailedChecks: []string{}, Generations: []GenerationInfo{}, Expected: []Entry{}, Removed: []Entry{},
		AlreadyGone: []Entry{}, LeftAlone: []Entry{}, Unexpected: []Found{}, Networks: []string{},
		RunDirs: []string{}, Ownership: []Evidence{}, Checks: map[string]Check{},
	}
	for _, g := range in.Generations {
		r.Generations = append(r.Generations, GenerationInfo{N: g.N, Instance: g.Instance})
		if g.N >= r.Generation {
			r.Generation, r.Instance = g.N, g.Instance
		}
	}
	r.WrittenAt = in.Finished.UTC()
	check := func(name string, observed, expected any, pass bool) {
		if c, ok := r.Checks[name]; ok && !c.Pass {
			return // two resources of one name: a failure is never hidden
		}
		r.Checks[name] = Check{Observed: observed, Expected: expected, Pass: pass}
	}
	seen := map[string]int{}
	for _, o := range in.Outcomes {
		res := o.Resource
		e := entry(res)
		r.Expected = append(r.Expected, e)
		seen[string(res.Kind)+"/"+res.ID]++
		switch res.Kind {
		case campaign.KindNetwork:
			r.Networks = append(r.Networks, res.ID)
		case campaign.KindDir:
			r.RunDirs = append(r.RunDirs, res.ID)
		}
		name := CheckName("gone", res.Kind, res.ID)
		check(name, stateText(o.After), "absent", o.After.State == Absent)
		if in.ReadOnly {
			// A verification removes nothing: it only says what is gone.
			if o.After.State == Absent {
				r.AlreadyGone = append(r.AlreadyGone, e)
			} else {
				e.Reason = stateText(o.After) + " (a verification removes nothing)"
				r.LeftAlone = append(r.LeftAlone, e)
			}
			continue
		}
		switch o.Decision.Action {
		case Remove:
			switch {
			case o.Error != "":
				e.Reason = "removal failed: " + o.Error
				r.LeftAlone = append(r.LeftAlone, e)
			default:
				r.Removed = append(r.Removed, e)
				r.Ownership = append(r.Ownership, Evidence{ID: res.ID, Kind: res.Kind, Labels: reserved(res.Labels)})
			}
		case AlreadyGone:
			r.AlreadyGone = append(r.AlreadyGone, e)
		default:
			e.Reason = string(o.Decision.Action) + ": " + o.Decision.Reason
			r.LeftAlone = append(r.LeftAlone, e)
		}
	}
	for _, u := range in.Unresolved {
		e := entry(u.Resource)
		e.Reason = "unresolved: " + u.Reason
		r.Expected = append(r.Expected, e)
		r.LeftAlone = append(r.LeftAlone, e)
		check(CheckName("resolved", u.Resource.Kind, u.Resource.Name), "unresolved: "+u.Reason, "absent or removed", false)
	}
	var dups []string
	for k, n := range seen {
		if n > 1 {
			dups = append(dups, k)
		}
	}
	slices.Sort(dups)
	check("unique_ids", orEmpty(dups), []string{}, len(dups) == 0)

	r.Unexpected = append(r.Unexpected, in.Labelled...)
	slices.SortFunc(r.Unexpected, func(a, b Found) int { return strings.Compare(string(a.Kind)+a.ID, string(b.Kind)+b.ID) })
	left := []string{}
	for _, f := range r.Unexpected {
		left = append(left, string(f.Kind)+"/"+f.ID)
	}
	if in.ListError != "" {
		check("labelled_none_left", "listing failed: "+in.ListError, []string{}, false)
	} else {
		check("labelled_none_left", left, []string{}, len(left) == 0)
	}

	for _, name := range slices.Sorted(maps.Keys(r.Checks)) {
		if !r.Checks[name].Pass {
			r.FailedChecks = append(r.FailedChecks, name)
		}
	}
	r.OK = len(r.FailedChecks) == 0
	r.Status = Failed
	if r.OK {
		r.Status = Verified
	}
	r.Timings = Timings{Started: in.Started.UTC(), Finished: in.Finished.UTC(), TotalMS: in.Finished.Sub(in.Started).Milliseconds()}
	if len(in.Phases) > 0 {
		r.Timings.PhasesMS = map[string]int64{}
		for k, d := range in.Phases {
			r.Timings.PhasesMS[k] = d.Milliseconds()
		}
	}
	return r
}

// CheckName names the check of one resource: "gone/container/<id>",
// "gone/network/<id>", "gone/dir/run/user/1001/agentpen/i-.../agent-..."
// (a directory's absolute path follows the kind without a second slash),
// "resolved/container/<name>".
func CheckName(check string, kind campaign.Kind, idOrName string) string {
	if kind == campaign.KindDir && strings.HasPrefix(idOrName, "/") {
		return check + "/" + string(kind) + idOrName
	}
	return check + "/" + string(kind) + "/" + idOrName
}

func entry(r campaign.Resource) Entry {
	return Entry{Kind: r.Kind, Role: r.Role, Name: r.Name, ID: r.ID, Gen: r.Gen}
}

// reserved returns the io.agentpen.* labels of m.
func reserved(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if strings.HasPrefix(k, campaign.ReservedLabelPrefix) {
			out[k] = v
		}
	}
	return out
}

func stateText(o Observation) string {
	switch o.State {
	case Absent:
		return "absent"
	case Present:
		return "present"
	}
	if o.Err != "" {
		return "unknown: " + o.Err
	}
	return "unknown"
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
