package drivertest

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/custody"
	"github.com/agentpen/agentpen/store"
)

// MedianSpec is a Target.Spec on a runtime that holds image: the grader
// and n workspaces, each on its own seed of software/median.
func MedianSpec(image string) func(id string, n int) campaign.CampaignSpec {
	return func(id string, n int) campaign.CampaignSpec {
		s := campaign.CampaignSpec{CampaignID: id, Server: campaign.ServerSpec{Image: image}}
		for i := range n {
			s.Workspaces = append(s.Workspaces, campaign.WorkspaceSpec{TaskID: fmt.Sprintf("software/median@%d", i+1), Image: image})
		}
		return s
	}
}

// AbsentImageSpec is a Target.Refused: a spec that validates, on an
// image no runtime holds.
func AbsentImageSpec(id string) campaign.CampaignSpec {
	return campaign.CampaignSpec{CampaignID: id, Server: campaign.ServerSpec{Image: "agentpen/absent:none"},
		Workspaces: []campaign.WorkspaceSpec{{TaskID: "software/median", Image: "agentpen/absent:none"}}}
}

// Target is a driver under the suite, on its runtime.
type Target struct {
	// Driver is the driver under test (required).
	Driver driver.Driver
	// Spec returns a campaign of n workspaces with the given id that the
	// runtime can run (its images present) (required).
	Spec func(id string, n int) campaign.CampaignSpec
	// Refused returns a spec that validates and that the runtime refuses
	// (its image absent); nil where there is none.
	Refused func(id string) campaign.CampaignSpec
	// Processes is true when the runtime runs the containers' processes:
	// their readiness is awaited. False on a fake daemon.
	Processes bool
	// Hand is another client of the runtime (required).
	Hand Hand
	// Getenv is the engine's environment (the grader's API key).
	Getenv func(string) string
	// CleanupTimeout bounds each removal of the suite's engines (zero: 45
	// s): a removal that cannot verify retries until then.
	CleanupTimeout time.Duration
	// Child, when set, is the environment a child process of the test
	// needs to open the driver again (the cases that kill an agentpen mid
	// bring-up and mid removal): the driver's test package's TestMain
	// calls Main with the function that opens it from that environment.
	// Nil leaves those cases out (an in-memory runtime).
	Child map[string]string
}

// Hand acts on the runtime as another of its clients would: the
// resources it makes are none of the campaign's journal's.
type Hand interface {
	// Remove removes the resource with r's kind and id.
	Remove(ctx context.Context, r campaign.Resource) error
	// Occupy makes a resource of kind named name carrying no label of
	// agentpen's, and returns its id.
	Occupy(ctx context.Context, kind campaign.Kind, name string) (string, error)
	// Copy makes a resource like r (its kind; a container from r's
	// image) named name and carrying labels, and returns its id: a twin
	// when name is r's (r being gone), a look-alike otherwise.
	Copy(ctx context.Context, r campaign.Resource, name string, labels map[string]string) (string, error)
	// Relabel changes r's labels in place, or returns an error wrapping
	// errors.ErrUnsupported where the runtime cannot (Docker's labels are
	// fixed at create).
	Relabel(ctx context.Context, r campaign.Resource, labels map[string]string) error
}

// T is what a case needs of its test: *testing.T has it, and so has the
// recorder Mutants runs a case with.
type T interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	Context() context.Context
	TempDir() string
	Name() string
}

// A Case is one demand of the suite.
type Case struct {
	// Name is the subtest's name.
	Name string
	// Run checks the demand on the target; the engine it is handed runs
	// on tg's driver (Mutants hands one on a mutant of it).
	Run func(t T, tg Target)
}

// Cases are the suite's demands, in order.
var Cases = []Case{
	{"journal_order", journalOrder},
	{"rollback", rollback},
	{"lost_answer", lostAnswer},
	{"name_taken", nameTaken},
	{"twin_survives", twinSurvives},
	{"relabelled_left_alone", relabelled},
	{"lookalike_left_alone", lookalike},
	{"cleanup_verified", cleanupVerified},
	{"verify_writes_nothing", verifyWritesNothing},
	{"removed_behind", removedBehind},
	{"orphans_provable", orphansProvable},
	{"refused_spec", refusedSpec},
	{"reports_verify", reportsVerify},
	{"killed_bringup", killedBringUp},
	{"killed_removal", killedRemoval},
}

// Run runs every case of the suite on tg, each as a subtest.
func Run(t *testing.T, tg Target) {
	for _, c := range Cases {
		t.Run(c.Name, func(t *testing.T) { c.Run(t, tg) })
	}
}

var seq atomic.Int64

// campaignID is a fresh campaign id for a case.
func campaignID(name string) string {
	return fmt.Sprintf("dt-%s-%d-%d", strings.ReplaceAll(name, "_", "-"), os.Getpid()%100000, seq.Add(1))
}

// unready is a driver whose containers are ready once started (a fake
// daemon runs no process).
type unready struct{ driver.Driver }

func (unready) Ready(context.Context, *driver.Object) error { return nil }
func (u unready) Unwrap() driver.Driver                     { return u.Driver }

// engine is a fresh engine on d (tg's driver, or a wrapper of it) with a
// state root of its own.
func engine(t T, tg Target, d driver.Driver) *Harness {
	t.Helper()
	if !tg.Processes {
		d = unready{d}
	}
	getenv := tg.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	root, err := store.CreateRoot(t.TempDir())
	if err != nil {
		t.Fatalf("state root: %v", err)
	}
	t.Cleanup(func() { root.Close() })
	timeout := tg.CleanupTimeout
	if timeout <= 0 {
		timeout = 45 * time.Second
	}
	if r, ok := t.(*recorder); ok {
		// Before the state root goes: what the mutant made is removed
		// with the target's own driver.
		t.Cleanup(func() { sweep(context.Background(), r.orig, root.Path()) })
	}
	return &Harness{Adapter: &adapter.Adapter{Driver: d, Getenv: getenv, ReadyTimeout: 2 * time.Minute, CleanupTimeout: timeout}, Root: root, StateRoot: root.Path()}
}

// up brings a campaign of n workspaces up on h and arranges its removal
// when the case ends (a removal that finds nothing left is harmless).
func up(t T, tg Target, h *Harness, name string, n int) (string, *adapter.Campaign) {
	t.Helper()
	id := campaignID(name)
	t.Cleanup(func() { h.Cleanup(context.Background(), id) })
	c, err := h.BringUp(t.Context(), tg.Spec(id, n))
	if err != nil {
		t.Fatalf("bring-up of %s: %v", id, err)
	}
	return id, c
}

// resources are the campaign's journalled resources that have an id.
func resources(t T, h *Harness, id string) []campaign.Resource {
	t.Helper()
	var out []campaign.Resource
	for _, r := range campaign.Resources(h.records(t, id)) {
		if r.ID != "" {
			out = append(out, r)
		}
	}
	return out
}

func (h *Harness) records(t T, id string) []campaign.Record {
	t.Helper()
	c, err := h.Root.Open(id)
	if err != nil {
		t.Fatalf("open %s: %v", id, err)
	}
	defer c.Close()
	recs, _, err := c.Records()
	if err != nil {
		t.Fatalf("journal of %s: %v", id, err)
	}
	return recs
}

// nothingLeft fails unless every resource the campaign ever journalled is
// absent and nothing carries its label.
func nothingLeft(t T, tg Target, h *Harness, id string) {
	t.Helper()
	for _, r := range resources(t, h, id) {
		if obs := tg.Driver.Observe(t.Context(), r); obs.State != cleanup.Absent {
			t.Errorf("%s %s (%s) is %v after the removal, want absent", r.Kind, r.Name, r.ID, obs.State)
		}
	}
	found, err := tg.Driver.List(t.Context(), campaign.LabelCampaign+"="+id)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(found) > 0 {
		t.Errorf("still labelled with the campaign: %v", found)
	}
}

// removeVerified removes the campaign and fails unless its report is
// verified and nothing is left.
func removeVerified(t T, tg Target, h *Harness, id string) *cleanup.Report {
	t.Helper()
	rep, err := h.Cleanup(t.Context(), id)
	if err != nil || !rep.OK {
		t.Fatalf("removal of %s: %v (report %+v)", id, err, rep)
	}
	nothingLeft(t, tg, h, id)
	return rep
}

// journalOrder: every resource is journalled as an intent (its labels
// with the create's secret) before the driver creates it, and its id
// after; what the runtime then holds under that id carries the intent's
// ownership labels, the secret among them.
func journalOrder(t T, tg Target) {
	h := engine(t, tg, tg.Driver)
	id, _ := up(t, tg, h, "order", 2)
	intents := map[string]campaign.Record{}
	created := 0
	for _, r := range h.records(t, id) {
		key := string(r.Kind) + " " + r.Name
		switch r.Op {
		case campaign.OpIntent:
			intents[key] = r
		case campaign.OpCreated:
			created++
			in, ok := intents[key]
			if !ok {
				t.Fatalf("%s created (%s) before its intent was journalled", key, r.ID)
			}
			obs := tg.Driver.Observe(t.Context(), campaign.Resource{Kind: r.Kind, Name: r.Name, ID: r.ID})
			if obs.State != cleanup.Present {
				t.Fatalf("%s journalled as %s, which the runtime does not hold: %+v", key, r.ID, obs)
			}
			if in.Labels != nil && (in.Labels[campaign.LabelCreate] == "" || !campaign.OwnedBy(obs.Labels, in.Labels) || obs.Labels[campaign.LabelCreate] != in.Labels[campaign.LabelCreate]) {
				t.Fatalf("%s (%s) carries %v, not its intent's ownership labels and create secret %v", key, r.ID, obs.Labels, in.Labels)
			}
		case campaign.OpCreateFailed:
			t.Fatalf("a create failed: %+v", r)
		}
	}
	if created < 3 || created != len(intents) {
		t.Fatalf("%d resources created for %d intents, want every intent created (at least a server and two workspaces)", created, len(intents))
	}
	removeVerified(t, tg, h, id)
}

// failing fails the nth Create (from 1) with the runtime's own refusal,
// after letting it be carried out when applied is set (an answer lost).
type failing struct {
	driver.Driver
	n       int64
	applied bool
	calls   atomic.Int64
	made    atomic.Value // the name the failing create was for
}

func (f *failing) Create(ctx context.Context, o *driver.Object) (string, error) {
	if f.calls.Add(1) != f.n {
		return f.Driver.Create(ctx, o)
	}
	f.made.Store(o.Name)
	if f.applied {
		if _, err := f.Driver.Create(ctx, o); err != nil {
			return "", err
		}
		return "", errors.New("drivertest: the connection dropped before the answer") // no kind: maybe applied
	}
	return "", driver.Kind("drivertest: refused", driver.ErrRefused)
}
func (f *failing) Unwrap() driver.Driver { return f.Driver }

// rollback: a create that fails midway rolls the bring-up back by exact
// id, verified.
func rollback(t T, tg Target) {
	h := engine(t, tg, &failing{Driver: tg.Driver, n: 4})
	id := campaignID("rollback")
	t.Cleanup(func() { h.Cleanup(context.Background(), id) })
	if _, err := h.BringUp(t.Context(), tg.Spec(id, 3)); err == nil {
		t.Fatalf("%s", "a bring-up whose fourth create failed came up")
	}
	recs := h.records(t, id)
	if !slices.ContainsFunc(recs, func(r campaign.Record) bool { return r.Op == campaign.OpRolledBack }) {
		t.Fatalf("%s", "the journal does not say the bring-up was rolled back")
	}
	if len(resources(t, h, id)) == 0 {
		t.Fatalf("%s", "nothing was created before the failure: the case proves nothing")
	}
	st, err := h.State(id)
	if err != nil || st.Cleanup != campaign.CleanupVerified {
		t.Fatalf("the rollback's cleanup is %q, not verified (%v)", st.Cleanup, err)
	}
	nothingLeft(t, tg, h, id)
}

// lostAnswer: a create the runtime carried out but whose answer was lost
// is resolved by its name and the create's secret, and removed.
func lostAnswer(t T, tg Target) {
	f := &failing{Driver: tg.Driver, n: 3, applied: true}
	h := engine(t, tg, f)
	id := campaignID("lost")
	t.Cleanup(func() { h.Cleanup(context.Background(), id) })
	if _, err := h.BringUp(t.Context(), tg.Spec(id, 2)); err == nil {
		t.Fatalf("%s", "a bring-up whose create answer was lost came up")
	}
	name, _ := f.made.Load().(string)
	resolved := false
	for _, r := range h.records(t, id) {
		if r.Op == campaign.OpCreated && r.Name == name && strings.Contains(r.Note, "resolved") {
			resolved = true
		}
	}
	if !resolved {
		t.Fatalf("the lost create of %s was not resolved by name: %v", name, h.records(t, id))
	}
	nothingLeft(t, tg, h, id)
}

// occupying has the hand take a workspace container's name just before
// the engine's create of it (the second workspace's): the runtime must
// answer that the name is taken.
type occupying struct {
	driver.Driver
	hand    Hand
	agentID string
	mu      sync.Mutex
	foreign campaign.Resource
}

func (o *occupying) Create(ctx context.Context, obj *driver.Object) (string, error) {
	if obj.Kind == campaign.KindContainer && obj.Labels[campaign.LabelAgent] == o.agentID {
		id, err := o.hand.Occupy(ctx, obj.Kind, obj.Name)
		if err != nil {
			return "", fmt.Errorf("drivertest: occupy %s: %w", obj.Name, err)
		}
		o.mu.Lock()
		o.foreign = campaign.Resource{Kind: obj.Kind, Name: obj.Name, ID: id}
		o.mu.Unlock()
	}
	return o.Driver.Create(ctx, obj)
}

func (o *occupying) Unwrap() driver.Driver { return o.Driver }

// nameTaken: a name another resource holds is never adopted: the create
// is journalled as never made, the other resource is left as it is.
func nameTaken(t T, tg Target) {
	id := campaignID("taken")
	spec := tg.Spec(id, 2)
	occ := &occupying{Driver: tg.Driver, hand: tg.Hand}
	h := engine(t, tg, occ)
	p, err := h.plan(spec)
	if err != nil {
		t.Fatalf("%v", err)
	}
	occ.agentID = p.Agents[1].AgentID
	t.Cleanup(func() {
		if occ.foreign.ID != "" {
			tg.Hand.Remove(context.Background(), occ.foreign)
		}
	})
	t.Cleanup(func() { h.Cleanup(context.Background(), id) })
	if _, err := h.BringUp(t.Context(), spec); err == nil {
		t.Fatalf("a bring-up came up with a container name another resource holds")
	}
	foreign := occ.foreign
	if foreign.ID == "" {
		t.Fatalf("the hand never took the second workspace's name")
	}
	for _, r := range resources(t, h, id) {
		if r.ID == foreign.ID {
			t.Fatalf("the foreign %s (%s) was journalled as the campaign's", foreign.Name, foreign.ID)
		}
	}
	if obs := tg.Driver.Observe(t.Context(), foreign); obs.State != cleanup.Present {
		t.Fatalf("the foreign %s (%s) is %v after the rollback: it was removed", foreign.Name, foreign.ID, obs.State)
	}
	// The foreign resource goes now: where it stands in the campaign's own
	// place (a cluster's namespace), the campaign's removal waits for it.
	if err := tg.Hand.Remove(t.Context(), foreign); err != nil {
		t.Fatalf("remove the foreign %s: %v", foreign.ID, err)
	}
	occ.foreign = campaign.Resource{}
	if rep, err := h.Cleanup(t.Context(), id); err != nil || !rep.OK {
		t.Fatalf("the rollback's removal, finished: %v %+v", err, rep)
	}
	nothingLeft(t, tg, h, id)
}

// workspaceContainer is the campaign's first workspace container.
func workspaceContainer(t T, h *Harness, id string) campaign.Resource {
	t.Helper()
	for _, r := range resources(t, h, id) {
		if r.Kind == campaign.KindContainer && r.Role == campaign.RoleWork && !r.Removed {
			return r
		}
	}
	t.Fatalf("%s has no workspace container", id)
	return campaign.Resource{}
}

// leftAlone removes the campaign, and fails unless the report is not
// verified, names the resource with id stranger, and that resource is
// still there; then the hand removes it.
func leftAlone(t T, tg Target, h *Harness, id string, stranger campaign.Resource) {
	t.Helper()
	rep, err := h.Cleanup(t.Context(), id)
	if err == nil || rep == nil || rep.OK {
		t.Fatalf("a removal that leaves %s %s behind says verified (%v)", stranger.Kind, stranger.ID, err)
	}
	b, _ := json.Marshal(rep)
	if !strings.Contains(string(b), stranger.ID) {
		t.Fatalf("the report does not name %s: %s", stranger.ID, b)
	}
	if obs := tg.Driver.Observe(t.Context(), stranger); obs.State != cleanup.Present {
		t.Fatalf("%s (%s) was removed: %v", stranger.Name, stranger.ID, obs.State)
	}
	if err := tg.Hand.Remove(t.Context(), stranger); err != nil {
		t.Fatalf("remove %s by hand: %v", stranger.ID, err)
	}
}

// twinSurvives: a twin (the journalled resource's name and labels, a new
// id) survives a removal aimed at the journalled id, and the report names
// it.
func twinSurvives(t T, tg Target) {
	h := engine(t, tg, tg.Driver)
	id, _ := up(t, tg, h, "twin", 1)
	r := workspaceContainer(t, h, id)
	labels := tg.Driver.Observe(t.Context(), r).Labels
	if err := tg.Hand.Remove(t.Context(), r); err != nil {
		t.Fatalf("remove %s by hand: %v", r.ID, err)
	}
	twin, err := tg.Hand.Copy(t.Context(), r, r.Name, labels)
	if err != nil {
		t.Fatalf("twin of %s: %v", r.Name, err)
	}
	if twin == r.ID {
		t.Fatalf("the twin has the journalled id %s", twin)
	}
	leftAlone(t, tg, h, id, campaign.Resource{Kind: r.Kind, Name: r.Name, ID: twin})
}

// relabelled: a resource relabelled in place is not taken for the
// campaign's: left alone, and reported.
func relabelled(t T, tg Target) {
	h := engine(t, tg, tg.Driver)
	id, _ := up(t, tg, h, "relabel", 1)
	r := workspaceContainer(t, h, id)
	labels := maps.Clone(tg.Driver.Observe(t.Context(), r).Labels)
	labels[campaign.LabelInstance] = "0000000000000000000000000000beef"
	err := tg.Hand.Relabel(t.Context(), r, labels)
	if errors.Is(err, errors.ErrUnsupported) {
		// This runtime fixes labels at create: a changed resource is a new
		// one (twin_survives and lookalike_left_alone are the demand here).
		t.Logf("the runtime cannot relabel in place: %v", err)
		removeVerified(t, tg, h, id)
		return
	}
	if err != nil {
		t.Fatalf("relabel %s: %v", r.ID, err)
	}
	leftAlone(t, tg, h, id, r)
}

// lookalike: a resource carrying a copy of a campaign resource's labels,
// its create's secret among them, under another name, is never taken for
// it: left alone and reported.
func lookalike(t T, tg Target) {
	h := engine(t, tg, tg.Driver)
	id, _ := up(t, tg, h, "lookalike", 1)
	r := workspaceContainer(t, h, id)
	labels := tg.Driver.Observe(t.Context(), r).Labels
	other, err := tg.Hand.Copy(t.Context(), r, r.Name+"-lookalike", labels)
	if err != nil {
		t.Fatalf("look-alike of %s: %v", r.Name, err)
	}
	leftAlone(t, tg, h, id, campaign.Resource{Kind: r.Kind, Name: r.Name + "-lookalike", ID: other})
}

// cleanupVerified: a removal re-observes every resource as absent and
// lists nothing labelled, and only then says verified.
func cleanupVerified(t T, tg Target) {
	h := engine(t, tg, tg.Driver)
	id, _ := up(t, tg, h, "clean", 2)
	rep := removeVerified(t, tg, h, id)
	gone := len(rep.Removed) + len(rep.AlreadyGone)
	if len(rep.Expected) < 3 || gone != len(rep.Expected) || len(rep.LeftAlone)+len(rep.Unexpected) > 0 {
		t.Fatalf("verified with %d expected, %d removed or gone, %d left alone, %d unexpected", len(rep.Expected), gone, len(rep.LeftAlone), len(rep.Unexpected))
	}
}

// dirState is every file of a directory tree with its size and time.
func dirState(t T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			fmt.Fprintf(&b, "%s %d %d\n", p, fi.Size(), fi.ModTime().UnixNano())
		}
		return nil
	})
	return b.String()
}

// verifyWritesNothing: verify says not verified while the campaign is
// up and verified once it is removed, and writes nothing either way.
func verifyWritesNothing(t T, tg Target) {
	h := engine(t, tg, tg.Driver)
	id, _ := up(t, tg, h, "verify", 1)
	dir := h.CampaignDir(id)
	before := dirState(t, dir)
	if rep, err := h.Verify(t.Context(), id); err == nil || rep.OK {
		t.Fatalf("verify of a campaign that is up: %v %+v", err, rep)
	}
	if after := dirState(t, dir); after != before {
		t.Fatalf("verify wrote:\n%s\nwas:\n%s", after, before)
	}
	removeVerified(t, tg, h, id)
	before = dirState(t, dir)
	if rep, err := h.Verify(t.Context(), id); err != nil || !rep.OK {
		t.Fatalf("verify of a removed campaign: %v %+v", err, rep)
	}
	if after := dirState(t, dir); after != before {
		t.Fatalf("verify wrote:\n%s\nwas:\n%s", after, before)
	}
}

// removedBehind: a resource someone else removed is seen as gone and
// reported so; the removal is still verified.
func removedBehind(t T, tg Target) {
	h := engine(t, tg, tg.Driver)
	id, _ := up(t, tg, h, "behind", 1)
	r := workspaceContainer(t, h, id)
	if err := tg.Hand.Remove(t.Context(), r); err != nil {
		t.Fatalf("remove %s by hand: %v", r.ID, err)
	}
	rep := removeVerified(t, tg, h, id)
	if !slices.ContainsFunc(rep.AlreadyGone, func(e cleanup.Entry) bool { return e.ID == r.ID }) {
		t.Fatalf("%s removed behind agentpen's back is not reported as already gone: %+v", r.ID, rep.AlreadyGone)
	}
}

// orphansProvable: a resource of a create the journal recorded without
// its id, carrying that create's secret, is listed as a provable orphan
// and removed; one with the same labels but not the secret is listed,
// not provable, and never removed.
func orphansProvable(t T, tg Target) {
	h := engine(t, tg, tg.Driver)
	id := campaignID("orphan")
	spec := tg.Spec(id, 1)
	p, err := h.plan(spec)
	if err != nil {
		t.Fatalf("%v", err)
	}
	p.Bind(1, campaign.NewInstance())
	l, err := tg.Driver.Layout(t.Context(), driver.BringUp{Plan: p, Agents: []int{0}, Campaign: true, APIKey: "unused-by-the-case",
		Lock: func(context.Context, string) (func(), error) { return func() {}, nil }})
	if err != nil {
		t.Fatalf("layout: %v", err)
	}
	if l.Done != nil {
		defer l.Done()
	}
	u := l.Workspaces[0]
	c, err := h.Root.Create(id)
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer c.Close()
	j, err := c.OpenJournal()
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer j.Close()
	if err := c.WriteSpec(1, spec); err != nil {
		t.Fatalf("%v", err)
	}
	if err := j.Append(campaign.Record{Op: campaign.OpBegin, Gen: 1, Instance: p.Instance}); err != nil {
		t.Fatalf("%v", err)
	}
	var made []campaign.Resource
	t.Cleanup(func() {
		for _, r := range slices.Backward(made) {
			tg.Driver.Remove(context.Background(), r, cleanup.Observation{})
		}
	})
	// What the workspace stands on (the grader too, which a cluster's
	// workspace names by its address) is made and journalled whole; its
	// container's create is journalled as an intent alone.
	var objs []*driver.Object
	for _, stage := range l.Shared {
		objs = append(objs, stage...)
	}
	if l.Server != nil {
		objs = append(objs, l.Server.Objects()...)
	}
	objs = append(objs, u.Objects()...)
	for _, o := range objs {
		if o.Labels != nil {
			o.Labels = campaign.WithCreateLabel(o.Labels)
		}
		if err := j.Append(campaign.Record{Op: campaign.OpIntent, Gen: 1, Kind: o.Kind, Role: o.Role, Name: o.Name, Labels: o.Labels}); err != nil {
			t.Fatalf("%v", err)
		}
		if o.ID, err = tg.Driver.Create(t.Context(), o); err != nil {
			t.Fatalf("create %s: %v", o, err)
		}
		made = append(made, o.Resource(1))
		if o != u.Main {
			if err := j.Append(campaign.Record{Op: campaign.OpCreated, Gen: 1, Kind: o.Kind, Role: o.Role, Name: o.Name, ID: o.ID}); err != nil {
				t.Fatalf("%v", err)
			}
		}
	}
	// Its id was never journalled: as after a crash between the create
	// and its record.
	orphan := u.Main.Resource(1)
	stranger := maps.Clone(u.Main.Labels)
	delete(stranger, campaign.LabelCreate)
	sid, err := tg.Hand.Copy(t.Context(), orphan, orphan.Name+"-copy", stranger)
	if err != nil {
		t.Fatalf("%v", err)
	}
	copied := campaign.Resource{Kind: orphan.Kind, Name: orphan.Name + "-copy", ID: sid}
	t.Cleanup(func() { tg.Hand.Remove(context.Background(), copied) })
	orphans, err := h.Orphans(t.Context())
	if err != nil {
		t.Fatalf("%v", err)
	}
	provable := map[string]bool{}
	for _, o := range orphans {
		if o.CampaignID == id {
			provable[o.ID] = o.Provable
		}
	}
	if p, ok := provable[orphan.ID]; !ok || !p {
		t.Fatalf("the orphan %s is listed %v provable %v: %+v", orphan.ID, ok, p, orphans)
	}
	if p, ok := provable[sid]; !ok || p {
		t.Fatalf("the copy %s without the create's secret is listed %v provable %v", sid, ok, p)
	}
	if _, err := h.RemoveOrphan(t.Context(), sid); !errors.Is(err, adapter.ErrNotOrphan) {
		t.Fatalf("removing the unprovable copy: %v", err)
	}
	if obs := tg.Driver.Observe(t.Context(), copied); obs.State != cleanup.Present {
		t.Fatalf("the unprovable copy is %v", obs.State)
	}
	out, err := h.RemoveOrphan(t.Context(), orphan.ID)
	if err != nil || out.After.State != cleanup.Absent {
		t.Fatalf("removing the provable orphan: %v %+v", err, out)
	}
}

// refusedSpec: a spec the runtime refuses creates nothing.
func refusedSpec(t T, tg Target) {
	if tg.Refused == nil {
		t.Logf("the target has no spec its runtime refuses")
		return
	}
	h := engine(t, tg, tg.Driver)
	id := campaignID("refused")
	t.Cleanup(func() { h.Cleanup(context.Background(), id) })
	if _, err := h.BringUp(t.Context(), tg.Refused(id)); err == nil {
		t.Fatalf("%s", "a refused spec came up")
	}
	if _, err := h.Root.Open(id); err == nil {
		for _, r := range h.records(t, id) {
			if r.Op == campaign.OpCreated {
				t.Fatalf("a refused spec created %s %s", r.Kind, r.Name)
			}
		}
	}
	if found, err := tg.Driver.List(t.Context(), campaign.LabelCampaign+"="+id); err != nil || len(found) > 0 {
		t.Fatalf("a refused spec left %v (%v)", found, err)
	}
}

// reportsVerify: the reports of a campaign's life verify with the state
// root's key, and a report changed by one byte is named.
func reportsVerify(t T, tg Target) {
	h := engine(t, tg, tg.Driver)
	id, _ := up(t, tg, h, "reports", 1)
	removeVerified(t, tg, h, id)
	key, err := h.Root.SigningKey()
	if err != nil {
		t.Fatalf("%v", err)
	}
	pub := key.Public().(ed25519.PublicKey)
	c, err := h.Root.Open(id)
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer c.Close()
	if res := custody.Verify(t.Context(), c, pub, custody.Options{}); !res.OK {
		t.Fatalf("the campaign's reports do not verify: %v", res.Failed)
	}
	st, err := c.Read()
	if err != nil || st.CleanupReport == "" {
		t.Fatalf("no cleanup report: %v", err)
	}
	path := c.ReportPath(st.CleanupReport)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v", err)
	}
	i := strings.Index(string(b), `"verified"`)
	if i < 0 {
		t.Fatalf("the report says nothing verified: %s", b)
	}
	b[i+1] = 'V'
	if err := os.Chmod(path, 0o600); err == nil {
		os.WriteFile(path, b, 0o600)
	}
	res := custody.Verify(t.Context(), c, pub, custody.Options{})
	named := false
	for _, ch := range res.Checks {
		if !ch.OK && strings.Contains(ch.ID+ch.Detail, st.CleanupReport) {
			named = true
		}
	}
	if res.OK || !named {
		t.Fatalf("a tampered report verifies (%v) or is not named: %+v", res.OK, res.Failed)
	}
}

// Child ------------------------------------------------------------------

// childEnv carries a child's job: what it runs, against which state root.
const childEnv = "AGENTPEN_DRIVERTEST_CHILD"

type childJob struct {
	Op        string                `json:"op"` // "up" or "down"
	StateRoot string                `json:"state_root"`
	Spec      campaign.CampaignSpec `json:"spec"`
	Processes bool                  `json:"processes"`
	Env       map[string]string     `json:"env"`
}

// Main is a driver's test package's TestMain when it runs the suite with
// Target.Reopen: a child of the suite (an agentpen killed mid bring-up or
// mid removal) runs its job on the driver open reopens, and exits;
// otherwise the tests run.
func Main(m *testing.M, reopen func() (driver.Driver, error)) {
	if raw := os.Getenv(childEnv); raw != "" {
		os.Exit(child(raw, reopen))
	}
	os.Exit(m.Run())
}

func child(raw string, reopen func() (driver.Driver, error)) int {
	var job childJob
	if err := json.Unmarshal([]byte(raw), &job); err != nil {
		fmt.Fprintln(os.Stderr, "drivertest child:", err)
		return 2
	}
	d, err := reopen()
	if err != nil {
		fmt.Fprintln(os.Stderr, "drivertest child:", err)
		return 2
	}
	defer d.Close()
	if !job.Processes {
		d = unready{d}
	}
	// Each create and removal takes a while, as on a loaded runtime: the
	// parent's kill lands in the middle, not after the end.
	d = slow{d}
	root, err := store.OpenRoot(job.StateRoot)
	if err != nil {
		fmt.Fprintln(os.Stderr, "drivertest child:", err)
		return 2
	}
	a := &adapter.Adapter{Driver: d, Getenv: func(k string) string { return job.Env[k] }, Parallelism: 1}
	ctx := context.Background()
	switch job.Op {
	case "up":
		opts, err := a.PlanOptions(root)
		if err == nil {
			var p *campaign.Plan
			if p, err = campaign.Validate(job.Spec, nil, opts); err == nil {
				_, err = a.BringUp(ctx, root, p)
			}
		}
		fmt.Fprintln(os.Stderr, "drivertest child: up:", err)
	case "down":
		c, err := root.Open(job.Spec.CampaignID)
		if err == nil {
			_, _, err = a.Cleanup(ctx, c, campaign.ReasonDown)
		}
		fmt.Fprintln(os.Stderr, "drivertest child: down:", err)
	}
	return 0
}

// killed runs op in a child agentpen on h's state root, kills it (SIGKILL)
// once the journal holds a record when says, then reconciles the campaign
// in this process: nothing may be left, and the removal must verify.
func killed(t T, tg Target, op string, h *Harness, spec campaign.CampaignSpec, when func([]campaign.Record) bool) {
	t.Helper()
	env := map[string]string{}
	if tg.Getenv != nil {
		for _, k := range []string{campaign.DefaultAPIKeyEnv} {
			env[k] = tg.Getenv(k)
		}
	}
	job, _ := json.Marshal(childJob{Op: op, StateRoot: h.StateRoot, Spec: spec, Processes: tg.Processes, Env: env})
	journal := h.JournalPath(spec.CampaignID)
	before := 0 // the journal's records before the child's
	if recs, err := ReadJournal(journal); err == nil {
		before = len(recs)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(job))
	for k, v := range tg.Child {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("%v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	hit := false
	for !hit {
		select {
		case err := <-done:
			t.Fatalf("the child ended before the moment to kill it (%v): %s", err, stderr.String())
		case <-time.After(5 * time.Millisecond):
		case <-t.Context().Done():
			cmd.Process.Kill()
			t.Fatalf("the journal never reached the moment to kill: %v", t.Context().Err())
		}
		if recs, err := ReadJournal(journal); err == nil && when(recs) {
			hit = true
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
	for _, r := range h.records(t, spec.CampaignID)[before:] {
		if r.Op == campaign.OpCleanup || r.Op == campaign.OpRolledBack || r.Op == campaign.OpReady {
			t.Fatalf("the child finished its %s (%s) before the kill: the case proves nothing", op, r.Op)
		}
	}
	c, err := h.Root.Open(spec.CampaignID)
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer c.Close()
	res, err := h.Reconcile(t.Context(), c, adapter.ReconcileOptions{LockWait: store.DefaultLockWait})
	if err != nil || res.Report == nil || !res.Report.OK {
		t.Fatalf("reconcile after the kill: %v %+v", err, res)
	}
	nothingLeft(t, tg, h, spec.CampaignID)
}

// slow is a driver whose creates and removals take 300 ms more.
type slow struct{ driver.Driver }

func (s slow) Create(ctx context.Context, o *driver.Object) (string, error) {
	time.Sleep(300 * time.Millisecond)
	return s.Driver.Create(ctx, o)
}

func (s slow) Remove(ctx context.Context, r campaign.Resource, seen cleanup.Observation) error {
	time.Sleep(300 * time.Millisecond)
	return s.Driver.Remove(ctx, r, seen)
}

// killedBringUp: an agentpen killed mid bring-up (after its second
// create) leaves nothing that reconcile does not remove, verified.
func killedBringUp(t T, tg Target) {
	if tg.Child == nil {
		t.Logf("the target's runtime cannot be reached from a child process")
		return
	}
	h := engine(t, tg, tg.Driver)
	id := campaignID("killup")
	t.Cleanup(func() { h.Cleanup(context.Background(), id) })
	killed(t, tg, "up", h, tg.Spec(id, 3), func(recs []campaign.Record) bool {
		n := 0
		for _, r := range recs {
			if r.Op == campaign.OpCreated {
				n++
			}
		}
		return n >= 2
	})
}

// killedRemoval: an agentpen killed mid removal (after its first removal)
// leaves nothing that reconcile does not remove, verified.
func killedRemoval(t T, tg Target) {
	if tg.Child == nil {
		t.Logf("the target's runtime cannot be reached from a child process")
		return
	}
	h := engine(t, tg, tg.Driver)
	id, _ := up(t, tg, h, "killdown", 3)
	killed(t, tg, "down", h, campaign.CampaignSpec{CampaignID: id}, func(recs []campaign.Record) bool {
		return slices.ContainsFunc(recs, func(r campaign.Record) bool { return r.Op == campaign.OpRemoved && r.ID != "" })
	})
}

// Mutants ---------------------------------------------------------------

// A mutant is a driver broken in one way that one case must catch.
type mutant struct {
	name string
	// wrap breaks d.
	wrap func(d driver.Driver) driver.Driver
}

// mutants are, by case, the mutation each case must fail on. A case
// without one cannot be failed by a driver (the reports are signed by
// the engine; the killed agentpen's child reopens the target's driver).
var mutants = map[string]mutant{
	"journal_order":         {"drops the create's secret label", func(d driver.Driver) driver.Driver { return &unlabelled{d} }},
	"rollback":              {"removes nothing", func(d driver.Driver) driver.Driver { return &inertRemove{d} }},
	"lost_answer":           {"never finds a name", func(d driver.Driver) driver.Driver { return &blindLookup{d} }},
	"name_taken":            {"adopts whatever holds a name", func(d driver.Driver) driver.Driver { return &adopting{d} }},
	"twin_survives":         {"observes and removes by name", func(d driver.Driver) driver.Driver { return &byName{d} }},
	"relabelled_left_alone": {"reports the intent's labels", func(d driver.Driver) driver.Driver { return &labelBlind{d} }},
	"lookalike_left_alone":  {"lists nothing", func(d driver.Driver) driver.Driver { return &listBlind{d} }},
	"cleanup_verified":      {"removes nothing", func(d driver.Driver) driver.Driver { return &inertRemove{d} }},
	"verify_writes_nothing": {"sees nothing", func(d driver.Driver) driver.Driver { return &absent{listBlind{d}} }},
	"removed_behind":        {"takes no such resource for no answer", func(d driver.Driver) driver.Driver { return &unsure{d} }},
	"orphans_provable":      {"lists nothing", func(d driver.Driver) driver.Driver { return &listBlind{d} }},
	"refused_spec":          {"resolves every image", func(d driver.Driver) driver.Driver { return &anyImage{d} }},
}

// Mutants runs every case that a driver can fail on a mutant of tg's
// driver that breaks it, and fails when the case passes: each case is
// able to fail. Run it on a target whose leftovers cost nothing (a fake
// daemon): a mutant that removes nothing leaves what it made, and only a
// final sweep by the hand removes it.
func Mutants(t *testing.T, tg Target) {
	for _, c := range Cases {
		m, ok := mutants[c.Name]
		if !ok {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			if c.Name == "relabelled_left_alone" {
				probe := campaign.Resource{Kind: campaign.KindContainer, Name: "none", ID: "none"}
				if err := tg.Hand.Relabel(t.Context(), probe, nil); errors.Is(err, errors.ErrUnsupported) {
					t.Logf("the runtime cannot relabel in place: the case has nothing to catch here")
					return
				}
			}
			mt := tg
			mt.Driver = m.wrap(tg.Driver)
			mt.CleanupTimeout = 5 * time.Second // a mutant's removal never verifies
			r := &recorder{T: t, orig: tg}
			r.run(func() { c.Run(r, mt) })
			if !r.failed {
				t.Errorf("%s passes on a driver that %s: it cannot fail", c.Name, m.name)
			}
		})
	}
}

// sweep removes, with tg's own driver, every campaign of a mutant case's
// state root, then, by hand, whatever still carries the label of
// a campaign of this process's cases.
func sweep(ctx context.Context, tg Target, stateRoot string) {
	a := &adapter.Adapter{Driver: tg.Driver, Getenv: tg.Getenv, CleanupTimeout: 30 * time.Second}
	if root, err := store.OpenRoot(stateRoot); err == nil {
		list, _ := root.List()
		for _, l := range list {
			if c, err := root.Open(l.ID); err == nil {
				a.Cleanup(ctx, c, campaign.ReasonDown)
				c.Close()
			}
		}
		root.Close()
	}
	found, err := tg.Driver.List(ctx, campaign.LabelOwner+"="+campaign.OwnerValue)
	if err != nil {
		return
	}
	mine := fmt.Sprintf("-%d-", os.Getpid()%100000)
	for _, f := range found {
		if id := f.Labels[campaign.LabelCampaign]; strings.HasPrefix(id, "dt-") && strings.Contains(id, mine) {
			tg.Hand.Remove(ctx, campaign.Resource{Kind: f.Kind, Name: f.Name, ID: f.ID})
		}
	}
}

// recorder is a T whose failures are recorded, not reported: Fatalf ends
// the case (run recovers it).
type recorder struct {
	*testing.T
	failed bool
	orig   Target // the target, its driver unbroken
}

type stopCase struct{}

func (r *recorder) Errorf(format string, args ...any) {
	r.failed = true
	r.T.Logf("(mutant caught) "+format, args...)
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(stopCase{})
}

func (r *recorder) run(f func()) {
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(stopCase); !ok {
				panic(v)
			}
		}
	}()
	f()
}

type unlabelled struct{ driver.Driver }

func (m *unlabelled) Create(ctx context.Context, o *driver.Object) (string, error) {
	if o.Labels != nil {
		l := maps.Clone(o.Labels)
		delete(l, campaign.LabelCreate)
		c := *o
		c.Labels = l
		return m.Driver.Create(ctx, &c)
	}
	return m.Driver.Create(ctx, o)
}

type inertRemove struct{ driver.Driver }

func (inertRemove) Remove(context.Context, campaign.Resource, cleanup.Observation) error { return nil }

type blindLookup struct{ driver.Driver }

func (blindLookup) Lookup(context.Context, campaign.Resource, string) (driver.Found, error) {
	return driver.Found{Absent: true, Definite: true}, nil
}

type adopting struct{ driver.Driver }

func (m *adopting) Create(ctx context.Context, o *driver.Object) (string, error) {
	id, err := m.Driver.Create(ctx, o)
	if errors.Is(err, driver.ErrNameTaken) {
		return "", errors.New(err.Error()) // its kind lost: resolved by name
	}
	return id, err
}

func (m *adopting) Lookup(ctx context.Context, r campaign.Resource, instance string) (driver.Found, error) {
	f, err := m.Driver.Lookup(ctx, r, instance)
	if err == nil && !f.Absent {
		f.Labels = r.Labels
	}
	return f, err
}

type byName struct{ driver.Driver }

func (m *byName) named(ctx context.Context, r campaign.Resource) campaign.Resource {
	if f, err := m.Driver.Lookup(ctx, r, ""); err == nil && !f.Absent {
		r.ID = f.ID
	}
	return r
}

func (m *byName) Observe(ctx context.Context, r campaign.Resource) cleanup.Observation {
	obs := m.Driver.Observe(ctx, m.named(ctx, r))
	if obs.State == cleanup.Present {
		obs.ID = r.ID // what holds the name taken for the journalled id
	}
	return obs
}

func (m *byName) Remove(ctx context.Context, r campaign.Resource, seen cleanup.Observation) error {
	return m.Driver.Remove(ctx, m.named(ctx, r), seen)
}

type labelBlind struct{ driver.Driver }

func (m *labelBlind) Observe(ctx context.Context, r campaign.Resource) cleanup.Observation {
	obs := m.Driver.Observe(ctx, r)
	if obs.State == cleanup.Present && r.Labels != nil {
		obs.Labels = r.Labels
	}
	return obs
}

type listBlind struct{ driver.Driver }

func (listBlind) List(context.Context, ...string) ([]cleanup.Found, error) { return nil, nil }

type absent struct{ listBlind }

func (absent) Observe(context.Context, campaign.Resource) cleanup.Observation {
	return cleanup.Observation{State: cleanup.Absent}
}

type unsure struct{ driver.Driver }

func (m *unsure) Observe(ctx context.Context, r campaign.Resource) cleanup.Observation {
	obs := m.Driver.Observe(ctx, r)
	if obs.State == cleanup.Absent {
		return cleanup.Observation{State: cleanup.Unknown, Err: "no answer"}
	}
	return obs
}

type anyImage struct{ driver.Driver }

func (m *anyImage) Resolve(ctx context.Context, ref string) (string, error) {
	if id, err := m.Driver.Resolve(ctx, ref); err == nil {
		return id, nil
	}
	return "sha256:" + strings.Repeat("0", 64), nil
}
