package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/internal/testkit/dockerfake"
	"github.com/agentpen/agentpen/store"
	"github.com/agentpen/agentpen/workbench/results"
)

// fakeRoot is a state root of hand-made campaigns beside a fake daemon.
type fakeRoot struct {
	t     *testing.T
	fake  *dockerfake.Daemon
	env   map[string]string
	state string // the state root
}

func newFakeRoot(t *testing.T) *fakeRoot {
	t.Helper()
	fake := dockerfake.New()
	host := fake.ServeUnix(t)
	dir := t.TempDir()
	return &fakeRoot{t: t, fake: fake, env: map[string]string{"DOCKER_HOST": host, "XDG_STATE_HOME": dir}, state: filepath.Join(dir, "agentpen")}
}

func (r *fakeRoot) run(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	err := run(r.t.Context(), args, &out, &errb, func(k string) string { return r.env[k] })
	if msg := cli.Message("agentpen", err); msg != "" {
		errb.WriteString(msg + "\n")
	}
	return out.String(), errb.String(), exitCode(err)
}

// campaign writes a campaign whose one generation came up and holds
// nothing (so down of it is verified at once), and returns its journal.
func (r *fakeRoot) campaign(id string) string {
	r.t.Helper()
	r.append(id,
		campaign.Record{Op: campaign.OpBegin, Gen: 1, Instance: "0123456789abcdef0123456789abcdef"},
		campaign.Record{Op: campaign.OpIntent, Gen: 1, Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: "agentpen-" + id + "-server"},
		campaign.Record{Op: campaign.OpRemoved, Gen: 1, Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: "agentpen-" + id + "-server", Note: "never created"},
		campaign.Record{Op: campaign.OpReady, Gen: 1},
	)
	root, err := store.OpenRoot(r.state)
	if err != nil {
		r.t.Fatal(err)
	}
	defer root.Close()
	c, err := root.Open(id)
	if err != nil {
		r.t.Fatal(err)
	}
	defer c.Close()
	const image = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	if err := c.WriteSpec(1, campaign.CampaignSpec{CampaignID: id, Server: campaign.ServerSpec{Image: image},
		Workspaces: []campaign.WorkspaceSpec{{TaskID: "software/median", Image: image}}}); err != nil {
		r.t.Fatal(err)
	}
	return c.JournalPath()
}

// append appends records to the campaign's journal, as agentpen does
// (each chained to the one before).
func (r *fakeRoot) append(id string, recs ...campaign.Record) {
	r.t.Helper()
	root, err := store.CreateRoot(r.state)
	if err != nil {
		r.t.Fatal(err)
	}
	defer root.Close()
	c, err := root.Create(id)
	if err != nil {
		r.t.Fatal(err)
	}
	defer c.Close()
	j, err := c.OpenJournal()
	if err != nil {
		r.t.Fatal(err)
	}
	defer j.Close()
	for _, rec := range recs {
		if err := j.Append(rec); err != nil {
			r.t.Fatal(err)
		}
	}
}

// state reads the campaign's journal state.
func (r *fakeRoot) read(id string) (store.State, []campaign.Record) {
	r.t.Helper()
	root, err := store.OpenRoot(r.state)
	if err != nil {
		r.t.Fatal(err)
	}
	defer root.Close()
	c, err := root.Open(id)
	if err != nil {
		r.t.Fatal(err)
	}
	defer c.Close()
	st, err := c.Read()
	if err != nil {
		r.t.Fatal(err)
	}
	recs, _, _ := c.Records()
	return st, recs
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// TestTornJournalTail: a journal whose last write did not complete (its
// final line has no newline) is read past by ls, which says so; down cuts
// the torn line before appending (it used to append onto it and make the
// journal unreadable for good) and is verified; the journal then reads
// back whole.
func TestTornJournalTail(t *testing.T) {
	r := newFakeRoot(t)
	journal := r.campaign("torn")
	appendFile(t, journal, `{"v":2,"seq":5,"time":"2026-11-30T12:00:00Z","op":"no`)
	out, errs, code := r.run("ls")
	if code != 0 || !strings.Contains(out, "torn") || !strings.Contains(errs, "agentpen ls: campaign torn: journal "+journal+": ignoring a final line of 53 bytes without its newline") {
		t.Fatalf("ls: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := r.run("down", "torn"); code != 0 || !strings.Contains(out, "cleanup of torn: verified") {
		t.Fatalf("down: exit %d\n%s%s", code, out, errs)
	}
	st, recs := r.read("torn")
	if st.Torn != nil {
		t.Fatalf("journal after down: torn %v", st.Torn)
	}
	cut := recs[4]
	if cut.Seq != 5 || !strings.HasPrefix(cut.Note, "journal: cut a final line of 53 bytes without its newline") {
		t.Fatalf("the record of the cut: %+v", cut)
	}
	if last := recs[len(recs)-1]; last.Op != campaign.OpCleanup || last.Status != campaign.CleanupVerified {
		t.Fatalf("last record %+v", last)
	}
	if out, errs, code := r.run("ls"); code != 0 || errs != "" || !strings.Contains(out, "removed") {
		t.Fatalf("ls after down: exit %d\n%s%s", code, out, errs)
	}
}

// TestUnsoundCampaignDoesNotBlindTheRoot: one campaign with a corrupt
// journal (a complete line that is not a record) and one whose journal
// another user can write are listed by ls and named by orphans, with
// their errors, beside the healthy one; both exit 1 after listing
// everything. The commands for the corrupt campaign itself fail with the
// file and the line.
func TestUnsoundCampaignDoesNotBlindTheRoot(t *testing.T) {
	r := newFakeRoot(t)
	r.campaign("healthy")
	corrupt := r.campaign("broken-journal")
	appendFile(t, corrupt, "{garbage}\n"+`{"v":2,"seq":6,"op":"note"}`+"\n")
	untrusted := r.campaign("foreign")
	if err := os.Chmod(untrusted, 0o666); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		os.Chown(untrusted, 65534, 65534)
	}

	out, errs, code := r.run("ls", "--json")
	if code != exitFailure {
		t.Fatalf("ls: exit %d, want 1\n%s%s", code, out, errs)
	}
	var entries []lsEntry
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("ls --json: %v\n%s", err, out)
	}
	got := map[string]lsEntry{}
	for _, e := range entries {
		got[e.CampaignID] = e
	}
	wantCorrupt := "journal " + corrupt + " line 5: invalid character 'g' looking for beginning of object key string: the journal is corrupt"
	if e := got["healthy"]; e.State != "removed" || e.Error != "" {
		t.Errorf("healthy: %+v", e)
	}
	if e := got["broken-journal"]; e.State != "unusable" || !strings.HasPrefix(e.Error, wantCorrupt) || e.Generation != 1 {
		t.Errorf("broken-journal: %+v", e)
	}
	// The untrusted one is named by its key: its spec is not read.
	foreign := got[campaign.Key("foreign")]
	if foreign.State != "unusable" || !strings.Contains(foreign.Error, "journal "+untrusted+" ") || !strings.Contains(foreign.Error, "agentpen trusts no state another user can write") {
		t.Errorf("foreign: %+v", foreign)
	}
	if !strings.Contains(errs, "agentpen ls: campaign broken-journal is unusable: "+wantCorrupt) || !strings.Contains(errs, "agentpen ls: campaign "+campaign.Key("foreign")+" is unusable: journal "+untrusted) {
		t.Errorf("ls stderr:\n%s", errs)
	}
	// The table, too, lists all three.
	if out, _, code := r.run("ls"); code != exitFailure || strings.Count(out, "\n") != 4 {
		t.Errorf("ls: exit %d\n%s", code, out)
	}
	if out, errs, code := r.run("orphans"); code != exitFailure || !strings.Contains(out, "\nKIND") || !strings.Contains(errs, "agentpen orphans: campaign broken-journal is unusable: "+wantCorrupt) {
		t.Errorf("orphans: exit %d\n%s%s", code, out, errs)
	}
	before, _ := os.ReadFile(corrupt)
	for _, args := range [][]string{{"down", "broken-journal"}, {"cleanup", "verify", "broken-journal"}, {"attest", "broken-journal"}} {
		_, errs, code := r.run(args...)
		if code != exitFailure || !strings.Contains(errs, wantCorrupt) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, want 1 naming the line\n%s", args, code, errs)
		}
	}
	if after, _ := os.ReadFile(corrupt); !bytes.Equal(before, after) {
		t.Error("a command changed the corrupt journal")
	}
	if _, errs, code := r.run("down", "foreign"); code != exitBadInput || !strings.Contains(errs, "agentpen down: journal "+untrusted+" ") {
		t.Errorf("down of the untrusted campaign: exit %d\n%s", code, errs)
	}
}

// TestStateRootRefusals: a state root that is a file, or that other users
// can write, is refused with its path and the fix (exit 2); agentpen makes
// its state root 0700.
func TestStateRootRefusals(t *testing.T) {
	r := newFakeRoot(t)
	r.campaign("one")
	if fi, err := os.Stat(r.state); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state root: %v %v", fi.Mode(), err)
	}
	file := filepath.Join(t.TempDir(), "passwd")
	os.WriteFile(file, []byte("x"), 0o600)
	if _, errs, code := r.run("ls", "--state-root", file); code != exitBadInput ||
		errs != "agentpen ls: unusable state root "+file+": not a directory (--state-root names the directory that holds the campaigns' state)\n" {
		t.Errorf("ls of a file: exit %d\n%s", code, errs)
	}
	os.Chmod(r.state, 0o777)
	for _, args := range [][]string{{"ls"}, {"down", "one"}, {"orphans"}} {
		want := "agentpen " + args[0] + ": unusable state root: state root " + r.state + " has mode 0777: other users can write it; agentpen trusts no state another user can write; if it is yours: chmod 0700 " + r.state + "\n"
		if _, errs, code := r.run(args...); code != exitBadInput || errs != want {
			t.Errorf("%v with a 0777 state root: exit %d\n%s\nwant\n%s", args, code, errs, want)
		}
	}
}

// TestAttestRefusesCampaignNotUp: attest of a campaign whose latest
// generation was removed exits 2 saying so, and writes nothing; it used to
// exit 0 and rewrite its report to "pending".
func TestAttestRefusesCampaignNotUp(t *testing.T) {
	r := newFakeRoot(t)
	journal := r.campaign("gone")
	r.append("gone", campaign.Record{Op: campaign.OpRemovalStarted, Reason: campaign.ReasonDown}, campaign.Record{Op: campaign.OpCleanup, Status: campaign.CleanupVerified})
	before, _ := os.ReadDir(filepath.Dir(journal))
	out, errs, code := r.run("attest", "gone", "--probe-timeout-ms", "100")
	want := "agentpen attest: campaign gone is not up: its latest generation (1) was removed (cleanup verified); nothing was attested\n"
	if code != exitBadInput || errs != want || out != "" {
		t.Fatalf("attest: exit %d, stdout %q, stderr\n%s\nwant\n%s", code, out, errs, want)
	}
	if after, _ := os.ReadDir(filepath.Dir(journal)); len(after) != len(before) {
		t.Fatalf("attest wrote a file: %v, before %v", after, before)
	}
	// A bring-up that failed and was rolled back says so (it read "was
	// removed (cleanup verified)", as if it had been up), and one killed
	// during its attestation says that.
	server := campaign.Record{Op: campaign.OpCreated, Gen: 1, Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: "s", ID: "c1"}
	for _, tt := range []struct {
		id   string
		recs []campaign.Record
		want string
	}{
		{"rolled", []campaign.Record{{Op: campaign.OpCleanup, Status: campaign.CleanupVerified}, {Op: campaign.OpRolledBack, Gen: 1, Note: "create x: boom; rolled back"}},
			"its latest generation (1) failed to come up and was rolled back (cleanup verified)"},
		{"killed", []campaign.Record{server, {Op: campaign.OpAttesting, Gen: 1}},
			"its latest generation (1) stopped while it was being attested at bring-up (killed, or still running in another process): agentpen down killed removes it"},
		// A down killed after it began: attest used to probe it and
		// rewrite its report ok while ls said broken and the API refused.
		{"removing", []campaign.Record{server, {Op: campaign.OpAttesting, Gen: 1}, {Op: campaign.OpAttested, Gen: 1, Status: campaign.AttestOK, Report: "attestation-1-1.json"},
			{Op: campaign.OpRemovalStarted, Reason: campaign.ReasonDown}},
			"its latest generation (1) is being removed, or a removal of it did not finish: agentpen down removing finishes it"},
	} {
		r.campaign(tt.id)
		r.append(tt.id, tt.recs...)
		_, errs, code := r.run("attest", tt.id, "--probe-timeout-ms", "100")
		if code != exitBadInput || !strings.Contains(errs, tt.want) {
			t.Errorf("attest %s: exit %d\n%s\nwant it to say %q", tt.id, code, errs, tt.want)
		}
	}
}

// TestLsStateAndNotes: ls says what the journal says, in the API's words,
// and notes what the daemon holds that the journal does not expect: a
// ready campaign whose containers are gone is still ready by its journal
// (it said "broken"), with the missing containers noted; a down that did
// not finish is cleanup_failed.
func TestLsStateAndNotes(t *testing.T) {
	r := newFakeRoot(t)
	r.campaign("live")
	labels := map[string]string{campaign.LabelCampaign: "live"}
	r.fake.AddContainer(dockerfake.Container{ID: "c-server", Name: "agentpen-live-server", Labels: labels})
	r.append("live",
		campaign.Record{Op: campaign.OpIntent, Gen: 1, Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: "agentpen-live-server"},
		campaign.Record{Op: campaign.OpCreated, Gen: 1, Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: "agentpen-live-server", ID: "c-server"},
		campaign.Record{Op: campaign.OpIntent, Gen: 1, Kind: campaign.KindDir, Role: campaign.RoleWork, Name: "/run/x/agent-1"},
		campaign.Record{Op: campaign.OpCreated, Gen: 1, Kind: campaign.KindDir, Role: campaign.RoleWork, Name: "/run/x/agent-1", ID: "/run/x/agent-1"},
		campaign.Record{Op: campaign.OpReady, Gen: 1},
	)
	entry := func() lsEntry {
		t.Helper()
		out, errs, code := r.run("ls", "--json")
		var entries []lsEntry
		if code != 0 || json.Unmarshal([]byte(out), &entries) != nil || len(entries) != 1 {
			t.Fatalf("ls: exit %d\n%s%s", code, out, errs)
		}
		return entries[0]
	}
	if e := entry(); e.State != "ready" || e.MissingContainers != 0 || len(e.Notes) != 0 {
		t.Fatalf("every container there: %+v, want ready", e)
	}
	// Its latest attestation failed (kept with --keep-failed, or a later
	// attest): attestation_failed, as the API says.
	for _, tt := range []struct{ status, want string }{{campaign.AttestFailed, "attestation_failed"}, {campaign.AttestOK, "ready"}} {
		r.append("live", campaign.Record{Op: campaign.OpAttested, Gen: 1, Status: tt.status, Report: "attestation-1-1.json"})
		if e := entry(); e.State != tt.want {
			t.Fatalf("attestation %s: %s, want %s", tt.status, e.State, tt.want)
		}
	}
	r.fake.On("GET /containers/json", dockerfake.Reply{Body: []any{}}) // removed outside agentpen
	if e := entry(); e.State != "ready" || e.MissingContainers != 1 || len(e.Notes) != 1 || !strings.Contains(e.Notes[0], "1 journalled containers gone from the daemon") {
		t.Fatalf("the server container gone from the daemon: %+v", e)
	}
	if out, _, _ := r.run("ls"); !strings.Contains(out, "1 journalled containers gone from the daemon") {
		t.Fatalf("ls does not note the missing container:\n%s", out)
	}
	// A down that removed the container and was killed before the run
	// directory: the journal says so.
	r.append("live", campaign.Record{Op: campaign.OpRemovalStarted, Reason: campaign.ReasonDown},
		campaign.Record{Op: campaign.OpRemoved, Gen: 1, Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: "agentpen-live-server", ID: "c-server"})
	if e := entry(); e.State != "cleanup_failed" {
		t.Fatalf("only the run directory left: %s, want cleanup_failed", e.State)
	}
}

// TestOrphansRemoveByListedID: orphans --remove takes the 12-digit id the
// listing shows (an unambiguous prefix of 12 or more hex digits), removes
// the resource by its full id, and says the full id; it refused the short
// id ("no ... resource ... has this exact id").
func TestOrphansRemoveByListedID(t *testing.T) {
	r := newFakeRoot(t)
	r.campaign("lost")
	const id = "5f0e3c9a1b2d4e6f8a7b6c5d4e3f2a1b5f0e3c9a1b2d4e6f8a7b6c5d4e3f2a1b"
	labels := map[string]string{
		campaign.LabelCampaign: "lost", campaign.LabelOwner: campaign.OwnerValue, campaign.LabelSchema: campaign.SchemaValue,
		campaign.LabelRole: campaign.RoleServer, campaign.LabelInstance: "0123456789abcdef0123456789abcdef",
		campaign.LabelCreate: "c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0"}
	// A create whose id the journal lost: its intent (with the create's
	// secret) is all that proves the container is agentpen's.
	r.append("lost", campaign.Record{Op: campaign.OpIntent, Gen: 1, Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: "agentpen-lost-server", Labels: labels})
	r.fake.AddContainer(dockerfake.Container{ID: id, Name: "agentpen-lost-server", Labels: labels})
	out, errs, code := r.run("orphans")
	if code != 0 || !strings.Contains(out, id[:12]+"  agentpen-lost-server  lost") || !strings.Contains(out, "true") {
		t.Fatalf("orphans: exit %d\n%s%s", code, out, errs)
	}
	for _, bad := range []struct{ id, want string }{
		{id[:11], `agentpen orphans: ` + id[:11] + `: not a removable orphan: no agentpen-labelled resource unaccounted for has this id, or an id starting with it (at least 12 hex digits); agentpen orphans lists them`},
		{"ffffffffffff", `agentpen orphans: ffffffffffff: not a removable orphan: no agentpen-labelled`},
	} {
		if _, errs, code := r.run("orphans", "--remove", bad.id); code != exitFailure || !strings.HasPrefix(errs, bad.want) {
			t.Errorf("--remove %s: exit %d\n%s", bad.id, code, errs)
		}
	}
	out, errs, code = r.run("orphans", "--remove", id[:12])
	if code != 0 || out != "removed container agentpen-lost-server "+id+"\n" {
		t.Fatalf("--remove %s: exit %d\n%s%s", id[:12], code, out, errs)
	}
	if len(r.fake.Containers()) != 0 {
		t.Fatalf("left on the daemon: %v", r.fake.Containers())
	}
}

// TestOrphansSaysItsRoot: orphans says which state root it speaks for,
// and tells a resource of a campaign this root has never held (another
// state root's, or one whose state is gone) from one of a campaign it
// holds whose journal lost it.
func TestOrphansSaysItsRoot(t *testing.T) {
	r := newFakeRoot(t)
	r.campaign("mine")
	labels := func(id string) map[string]string {
		return map[string]string{campaign.LabelCampaign: id, campaign.LabelOwner: campaign.OwnerValue, campaign.LabelSchema: campaign.SchemaValue,
			campaign.LabelRole: campaign.RoleServer, campaign.LabelInstance: "0123456789abcdef0123456789abcdef",
			campaign.LabelCreate: "c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0"}
	}
	r.fake.AddContainer(dockerfake.Container{ID: strings.Repeat("a", 64), Name: "agentpen-mine-server", Labels: labels("mine")})
	r.fake.AddContainer(dockerfake.Container{ID: strings.Repeat("b", 64), Name: "agentpen-theirs-server", Labels: labels("theirs")})
	out, errs, code := r.run("orphans")
	if code != 0 || !strings.HasPrefix(out, "state root "+r.state+": ") {
		t.Fatalf("orphans: exit %d, the first line does not name the state root %s:\n%s%s", code, r.state, out, errs)
	}
	for _, c := range []struct{ id, why string }{
		{"aaaaaaaaaaaa", "no journal in this state root"},
		{"bbbbbbbbbbbb", `no campaign "theirs" in this state root`},
	} {
		var line string
		for l := range strings.SplitSeq(out, "\n") {
			if strings.Contains(l, c.id) {
				line = l
			}
		}
		if !strings.Contains(line, c.why) {
			t.Errorf("%s reads %q, want %q in it", c.id, line, c.why)
		}
	}
}

// TestVerifyNamesEachCheckOnce: cleanup verify of a campaign that is up
// lists each failed check once (stdout), then says how many failed, once,
// on stderr; resources read as "container NAME (ID)" and "directory
// PATH", and a directory's check name has no doubled slash.
func TestVerifyNamesEachCheckOnce(t *testing.T) {
	r := newFakeRoot(t)
	r.campaign("up")
	r.fake.AddContainer(dockerfake.Container{ID: "c0ffee000000000000000000000000000000000000000000000000000000cafe", Name: "agentpen-up-server",
		Labels: map[string]string{campaign.LabelCampaign: "up"}})
	dir := filepath.Join(t.TempDir(), "agent-1")
	os.Mkdir(dir, 0o700)
	const server = "c0ffee000000000000000000000000000000000000000000000000000000cafe"
	r.append("up",
		campaign.Record{Op: campaign.OpIntent, Gen: 1, Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: "agentpen-up-server"},
		campaign.Record{Op: campaign.OpCreated, Gen: 1, Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: "agentpen-up-server", ID: server},
		campaign.Record{Op: campaign.OpIntent, Gen: 1, Kind: campaign.KindDir, Role: campaign.RoleWork, Name: dir},
		campaign.Record{Op: campaign.OpCreated, Gen: 1, Kind: campaign.KindDir, Role: campaign.RoleWork, Name: dir, ID: dir},
	)
	out, errs, code := r.run("cleanup", "verify", "up")
	for _, want := range []string{
		"  left alone: container agentpen-up-server (c0ffee000000): present (a verification removes nothing)\n",
		"  left alone: directory " + dir + ": present (a verification removes nothing)\n",
		"  failed check: gone/container/c0ffee000000000000000000000000000000000000000000000000000000cafe\n",
		"  failed check: gone/dir" + dir + "\n",
		"  failed check: labelled_none_left\n",
	} {
		if strings.Count(out, want) != 1 {
			t.Errorf("stdout does not say once %q:\n%s", want, out)
		}
	}
	if want := "agentpen cleanup verify: campaign up: cleanup not verified: 3 failed checks (each named above)\n"; code != exitFailure || errs != want {
		t.Fatalf("exit %d, stderr\n%s\nwant\n%s", code, errs, want)
	}
}

// TestEmptyCampaign: a campaign directory whose journal holds no record
// (what a create killed before its first record left, before creates
// were one step on disk) reads empty in ls and orphans, never removed,
// saying what to do; a create of its id is refused, saying so; reconcile
// --dry-run says it would remove it, and reconcile removes it (nothing
// on the daemon carries its id) and nothing else.
func TestEmptyCampaign(t *testing.T) {
	r := newFakeRoot(t)
	r.campaign("kept")
	dir := filepath.Join(r.state, "campaigns", campaign.Key("ghost"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, campaign.JournalFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, store.SpecFile(1)), []byte(`{"campaign_id": "ghost"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errs, code := r.run("ls", "--json")
	var entries []lsEntry
	if code != 0 || json.Unmarshal([]byte(out), &entries) != nil || len(entries) != 2 {
		t.Fatalf("ls: exit %d\n%s%s", code, out, errs)
	}
	if e := entries[0]; e.CampaignID != "ghost" || e.State != campaign.StatusEmpty.String() || len(e.Notes) != 1 || !strings.Contains(e.Notes[0], "agentpen reconcile") {
		t.Fatalf("ls lists the empty campaign as %+v", e)
	}
	if _, errs, code := r.run("orphans"); code != 0 || !strings.Contains(errs, "campaign ghost is empty: its journal holds no generation") {
		t.Fatalf("orphans: exit %d\n%s", code, errs)
	}
	root, err := store.OpenRoot(r.state)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.Create("ghost"); !errors.Is(err, store.ErrEmptyCampaign) || exitCode(err) != exitConflict {
		t.Fatalf("a create over it: %v (exit %d), want a conflict", err, exitCode(err))
	}
	root.Close()
	reconciled := func(args ...string) map[string]reconciled {
		t.Helper()
		out, errs, code := r.run(append([]string{"reconcile", "--json"}, args...)...)
		var res struct{ Campaigns []reconciled }
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("reconcile %v: exit %d\n%s%s", args, code, out, errs)
		}
		m := map[string]reconciled{}
		for _, c := range res.Campaigns {
			m[c.CampaignID] = c
		}
		return m
	}
	if m := reconciled("--dry-run"); m["ghost"].Action != "would_remove" || m["ghost"].Reason != "empty" || m["kept"].Action != "left" {
		t.Fatalf("reconcile --dry-run: %+v", m)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the dry run removed it: %v", err)
	}
	if m := reconciled(); m["ghost"].Action != "removed" || m["ghost"].Status != campaign.StatusEmpty.String() || m["kept"].Action != "left" {
		t.Fatalf("reconcile: %+v", m)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("still there after reconcile: %v", err)
	}
	if out, _, _ := r.run("ls"); strings.Contains(out, "ghost") || !strings.Contains(out, "kept") {
		t.Fatalf("ls after: %s", out)
	}
}

// TestResultsSayWhyCodeStopped: agentpen results shows, for each
// episode, why the last of its runs that did not exit 0 stopped (the
// inferred stops marked, with their evidence), and "-" when every run
// exited 0.
func TestResultsSayWhyCodeStopped(t *testing.T) {
	r := newFakeRoot(t)
	r.campaign("played")
	root, err := store.OpenRoot(r.state)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	c, err := root.Open("played")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t0 := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	rec := func(ep string) store.Result {
		return store.Result{Generation: 1, AgentID: "agent-0", SourceEnd: 100, CollectedAt: t0,
			Record: results.Record{V: results.Version, EpisodeID: ep, TaskID: "software/median@7", Domain: "software",
				Steps: 2, End: results.EndClosed, StartedAt: t0, EndedAt: t0.Add(time.Second)}}
	}
	bomb, clean := rec("e-bomb"), rec("e-clean")
	bomb.Runs.Add(results.StopMemory)
	bomb.Stop = results.RunStop{Reason: results.StopMemory, Inferred: true, Evidence: results.EvidenceMemoryError, Status: 1}
	clean.Runs.Add(results.StopExited)
	l, err := c.OpenResultsLog()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append([]store.Result{bomb, clean}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	out, errs, code := r.run("results", "played")
	if code != 0 || !strings.Contains(out, "CODE STOPPED") {
		t.Fatalf("results: exit %d\n%s%s", code, out, errs)
	}
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.Contains(line, "e-bomb") && !strings.Contains(line, "memory (inferred from MemoryError; exited 1)"),
			strings.Contains(line, "e-clean") && !strings.Contains(line, "closed  -  "):
			t.Errorf("%q", line)
		}
	}
}
