package attest

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Comparison is two attestations compared field by field (agentpen
// diff): what ran (the agentpen build, the driver and runtime, each
// container's image, workbench, seccomp profile and limits) and the ids
// and times that name one campaign.
type Comparison struct {
	// Same is true when nothing but ignored ids and times differs.
	Same bool `json:"same"`
	// Differs are the fields whose values differ, in the records' order:
	// the campaign's, then each subject's.
	Differs []FieldDiff `json:"differs"`
	// OnlyRequested are the limits requested of the runtime that it does
	// not enforce, in either record: a limit the two agree on there was
	// still not in force.
	OnlyRequested []FieldDiff `json:"only_requested"`
	// Ignored are the ids and times that differ where the same image ran
	// (a container's id where it ran the same image id; the campaign's
	// ids and times where every container did): two runs of one image
	// always differ in them.
	Ignored []FieldDiff `json:"ignored"`
}

// FieldDiff is one field of the two records: its name ("fingerprint.
// runtime.version", "workspaces[0].image_id") and its value in each
// ("" when a record has none; "(absent)" when it has no such subject).
type FieldDiff struct {
	// Field names the field.
	Field string `json:"field"`
	// A is its value in the first record.
	A string `json:"a"`
	// B is its value in the second record.
	B string `json:"b"`
}

// Absent is the value of a subject's fields in a record without it.
const Absent = "(absent)"

// field is one compared value: an id or time is ignored where the same
// image ran.
type field struct {
	name, value string
	idOrTime    bool
}

// Compare compares two attestations' records (see Comparison).
func Compare(a, b *Report) Comparison {
	cmp := Comparison{Differs: []FieldDiff{}, OnlyRequested: []FieldDiff{}, Ignored: []FieldDiff{}}
	subjects := []string{}
	ca, cb := map[string]ContainerFingerprint{}, map[string]ContainerFingerprint{}
	for _, c := range a.Fingerprint.Containers {
		ca[c.Subject] = c
		subjects = append(subjects, c.Subject)
	}
	for _, c := range b.Fingerprint.Containers {
		cb[c.Subject] = c
		if _, ok := ca[c.Subject]; !ok {
			subjects = append(subjects, c.Subject)
		}
	}
	sameImages := len(subjects) > 0
	for _, s := range subjects {
		x, okA := ca[s]
		y, okB := cb[s]
		if !okA || !okB || x.ImageID == "" || x.ImageID != y.ImageID {
			sameImages = false
		}
	}
	cmp.add(campaignFields(a), campaignFields(b), sameImages)
	for _, s := range subjects {
		x, okA := ca[s]
		y, okB := cb[s]
		if !okA || !okB {
			va, vb := "present", "present"
			if !okA {
				va = Absent
			}
			if !okB {
				vb = Absent
			}
			cmp.Differs = append(cmp.Differs, FieldDiff{Field: s, A: va, B: vb})
			continue
		}
		cmp.add(containerFields(x), containerFields(y), x.ImageID != "" && x.ImageID == y.ImageID)
		for _, l := range []struct {
			name string
			a, b LimitFingerprint
		}{{"memory", x.Limits.Memory, y.Limits.Memory}, {"pids", x.Limits.Pids, y.Limits.Pids}} {
			if l.a.Requested > 0 && !l.a.Enforced || l.b.Requested > 0 && !l.b.Enforced {
				cmp.OnlyRequested = append(cmp.OnlyRequested, FieldDiff{Field: s + ".limits." + l.name, A: enforcement(l.a), B: enforcement(l.b)})
			}
		}
	}
	cmp.Same = len(cmp.Differs) == 0
	return cmp
}

// add compares two records' fields, in order (the same names: they come
// from the same function); ids and times go to Ignored when ignore says
// the same image ran.
func (c *Comparison) add(a, b []field, ignore bool) {
	for i := range a {
		if a[i].value == b[i].value {
			continue
		}
		d := FieldDiff{Field: a[i].name, A: a[i].value, B: b[i].value}
		if a[i].idOrTime && ignore {
			c.Ignored = append(c.Ignored, d)
		} else {
			c.Differs = append(c.Differs, d)
		}
	}
}

func enforcement(l LimitFingerprint) string {
	switch {
	case l.Requested == 0:
		return "not requested"
	case l.Enforced:
		return fmt.Sprintf("%d, enforced", l.Requested)
	}
	return fmt.Sprintf("%d requested (%d recorded), not enforced", l.Requested, l.Recorded)
}

// campaignFields are a record's campaign-wide fields.
func campaignFields(r *Report) []field {
	f, rt := r.Fingerprint, r.Fingerprint.Runtime
	return []field{
		{"campaign_id", r.CampaignID, true},
		{"generation", fmt.Sprint(r.Generation), true},
		{"instance", r.Instance, true},
		{"attested_at", r.AttestedAt.UTC().Format(time.RFC3339Nano), true},
		// The verdict: a record that failed did not run what the other
		// ran, whatever its fingerprint says (review of issue 44).
		{"ok", fmt.Sprint(r.OK), false},
		{"failed_checks", strings.Join(r.FailedChecks, ","), false},
		{"producer.version", r.Producer.Version, false},
		{"producer.commit", r.Producer.Commit, false},
		{"producer.modified", fmt.Sprint(r.Producer.Modified), false},
		{"fingerprint.driver", f.Driver, false},
		{"fingerprint.runtime.endpoint", rt.Endpoint, false},
		{"fingerprint.runtime.id", rt.ID, false},
		{"fingerprint.runtime.name", rt.Name, false},
		{"fingerprint.runtime.version", rt.Version, false},
		{"fingerprint.runtime.kernel_version", rt.KernelVersion, false},
		{"fingerprint.runtime.rootless", fmt.Sprint(rt.Rootless), false},
		{"fingerprint.runtime.cgroup_driver", rt.CgroupDriver, false},
		{"fingerprint.runtime.cgroup_version", rt.CgroupVersion, false},
		{"limits.memory_enforced", fmt.Sprint(r.Limits.MemoryEnforced), false},
		{"limits.pids_enforced", fmt.Sprint(r.Limits.PidsEnforced), false},
	}
}

// containerFields are one container's fields, named by its subject.
func containerFields(c ContainerFingerprint) []field {
	s := c.Subject + "."
	var wb [3]string
	if w := c.Workbench; w != nil {
		wb = [3]string{w.Version, w.Commit, w.Digest}
		if w.Modified {
			wb[1] += " (modified)"
		}
	}
	limit := func(l LimitFingerprint) string {
		return fmt.Sprintf("requested %d, recorded %d, enforced %v", l.Requested, l.Recorded, l.Enforced)
	}
	return []field{
		{s + "container_id", c.ContainerID, true},
		{s + "requested", c.Requested, false},
		{s + "reference", c.Reference, false},
		{s + "image_id", c.ImageID, false},
		{s + "config_digest", c.ConfigDigest, false},
		{s + "repo_digests", strings.Join(slices.Sorted(slices.Values(c.RepoDigests)), " "), false},
		{s + "workbench.version", wb[0], false},
		{s + "workbench.commit", wb[1], false},
		{s + "workbench.digest", wb[2], false},
		{s + "seccomp", c.Seccomp, false},
		{s + "limits.memory", limit(c.Limits.Memory), false},
		{s + "limits.pids", limit(c.Limits.Pids), false},
	}
}
