package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
)

// createLoopEnv names the state root the test binary, run as a child,
// creates campaigns in until it is killed (TestCreateKilledAtRandom).
const createLoopEnv = "AGENTPEN_TEST_STORE_CREATE_LOOP"

func TestMain(m *testing.M) {
	if root := os.Getenv(createLoopEnv); root != "" {
		createLoop(root)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// createLoop creates campaigns in root as a bring-up does (spec, daemon
// record, then the journal's records), one after another, forever.
func createLoop(root string) {
	r, err := CreateRoot(root)
	if err != nil {
		panic(err)
	}
	os.Stdout.WriteString("ready\n")
	for i := 0; ; i++ {
		id := fmt.Sprintf("loop-%d-%d", os.Getpid(), i)
		c, err := r.Create(id)
		if err != nil {
			panic(err)
		}
		spec := campaign.CampaignSpec{CampaignID: id}
		if err := c.WriteSpec(1, spec); err != nil {
			panic(err)
		}
		if err := c.WriteDaemon(1, attest.DaemonRecord{}); err != nil {
			panic(err)
		}
		j, err := c.OpenJournal()
		if err != nil {
			panic(err)
		}
		for _, rec := range []campaign.Record{{Op: campaign.OpBegin, Gen: 1, Instance: "i"}, {Op: campaign.OpIntent, Gen: 1, Kind: campaign.KindContainer, Name: "w"}} {
			if err := j.Append(rec); err != nil {
				panic(err)
			}
		}
		j.Close()
		c.Close()
	}
}

// TestCreateOneStep: a new campaign's directory appears with its first
// journal record or not at all. Until then its files (spec, daemon
// record, journal) are somewhere nothing lists or opens, under the
// directory's path in messages; the first record puts it in place; a
// create closed before its first record leaves nothing, and so does the
// next create of an id whose earlier create was killed.
func TestCreateOneStep(t *testing.T) {
	r, err := CreateRoot(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	listed := func() []string {
		t.Helper()
		l, err := r.List()
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, x := range l {
			ids = append(ids, x.ID+":"+x.State.Status.String())
		}
		return ids
	}
	c, err := r.Create("one-step")
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != r.CampaignDir("one-step") || c.JournalPath() != filepath.Join(c.Path, campaign.JournalFile) {
		t.Fatalf("paths %s, %s: want the campaign's own", c.Path, c.JournalPath())
	}
	if err := c.WriteSpec(1, campaign.CampaignSpec{CampaignID: "one-step"}); err != nil {
		t.Fatal(err)
	}
	j, err := c.OpenJournal()
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, err := os.Lstat(c.Path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the campaign's directory exists before its first record: %v", err)
	}
	if ids := listed(); len(ids) != 0 {
		t.Fatalf("listed before its first record: %v", ids)
	}
	if _, err := r.Open("one-step"); !errors.Is(err, ErrNoCampaign) {
		t.Fatalf("opened before its first record: %v", err)
	}
	if st, err := r.Staged(); err != nil || len(st) != 1 || st[0].Key != c.Key {
		t.Fatalf("staged: %+v %v", st, err)
	}
	if err := j.Append(campaign.Record{Op: campaign.OpBegin, Gen: 1, Instance: "i"}); err != nil {
		t.Fatal(err)
	}
	if ids := listed(); fmt.Sprint(ids) != "[one-step:starting_or_failed]" {
		t.Fatalf("listed after its first record: %v", ids)
	}
	if err := j.Append(campaign.Record{Op: campaign.OpReady, Gen: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.Path, SpecFile(1))); err != nil {
		t.Fatalf("the spec is not in the campaign's directory: %v", err)
	}
	if err := c.WriteDaemon(1, attest.DaemonRecord{}); err != nil {
		t.Fatalf("a file after the first record: %v", err)
	}
	c.Close()
	if st, err := r.Staged(); err != nil || len(st) != 0 {
		t.Fatalf("staged after: %+v %v", st, err)
	}
	o, err := r.Open("one-step")
	if err != nil {
		t.Fatal(err)
	}
	if recs, _, err := o.Records(); err != nil || len(recs) != 2 {
		t.Fatalf("records %v %v", recs, err)
	}
	o.Close()

	// Closed before its first record: nothing.
	c2, err := r.Create("never-begun")
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.WriteSpec(1, campaign.CampaignSpec{CampaignID: "never-begun"}); err != nil {
		t.Fatal(err)
	}
	c2.Close()
	if st, err := r.Staged(); err != nil || len(st) != 0 {
		t.Fatalf("staged after a create closed before its first record: %+v %v", st, err)
	}
	if _, err := os.Lstat(r.CampaignDir("never-begun")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a create closed before its first record left its directory: %v", err)
	}

	// Killed (never closed) before its first record: the next create of
	// the id removes what it left.
	if _, err := r.Create("killed"); err != nil {
		t.Fatal(err)
	}
	c3, err := r.Create("killed")
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if st, err := r.Staged(); err != nil || len(st) != 1 || !strings.HasSuffix(c3.staged, strings.TrimPrefix(st[0].Name, stagingPrefix+c3.Key)) {
		t.Fatalf("staged after a second create of a killed one: %+v %v", st, err)
	}
}

// TestEmptyCampaign: a directory whose journal holds no generation (what
// a create killed before its first record left, before creates were one
// step) reads empty, never removed; a create of its id is refused, saying
// what to do; RemoveEmpty removes it and nothing else: not a campaign
// with a generation. An empty directory of the id without a journal (a
// create refused before it wrote one) is replaced by the next create.
func TestEmptyCampaign(t *testing.T) {
	r, err := CreateRoot(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ghost := r.CampaignDir("ghost")
	if err := os.MkdirAll(ghost, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ghost, campaign.JournalFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ghost, SpecFile(1)), []byte(`{"campaign_id": "ghost"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := r.List()
	if err != nil || len(l) != 1 || l[0].ID != "ghost" || l[0].State.Status != campaign.StatusEmpty || l[0].Key != campaign.Key("ghost") {
		t.Fatalf("listed: %+v %v", l, err)
	}
	if _, err := r.Create("ghost"); !errors.Is(err, ErrEmptyCampaign) || !strings.Contains(err.Error(), "agentpen reconcile") {
		t.Fatalf("a create over an empty campaign: %v", err)
	}
	_, live := newCampaignIn(t, r, "live", begun...)
	if err := r.RemoveEmpty(live.Key); err == nil {
		t.Fatal("RemoveEmpty removed a campaign with a generation")
	}
	if err := r.RemoveEmpty(l[0].Key); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(ghost); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the empty campaign's directory is still there: %v", err)
	}
	if _, err := r.Open("live"); err != nil {
		t.Fatalf("the other campaign: %v", err)
	}

	// An empty directory without a journal is no campaign; a create of
	// its id takes its place.
	if err := os.MkdirAll(r.CampaignDir("refused"), 0o700); err != nil {
		t.Fatal(err)
	}
	newCampaignIn(t, r, "refused", begun...)
	if c, err := r.Open("refused"); err != nil {
		t.Fatalf("a create over an empty directory: %v", err)
	} else {
		c.Close()
	}
}

// newCampaignIn creates campaign id in r with a journal of recs.
func newCampaignIn(t *testing.T, r *Root, id string, recs ...campaign.Record) (*Root, *Campaign) {
	t.Helper()
	c, err := r.Create(id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	j, err := c.OpenJournal()
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, rec := range recs {
		if err := j.Append(rec); err != nil {
			t.Fatal(err)
		}
	}
	return r, c
}

// TestCreateKilledAtRandom: a process creating campaigns one after
// another (spec, daemon record, journal records), SIGKILLed at a random
// moment in its first milliseconds, again and again, never leaves a
// campaign whose journal holds no record: each one listed has its first
// record, and what a create killed before it left is nothing anyone
// lists, and goes with the next sweep.
func TestCreateKilledAtRandom(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "state")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	kills, listed := 0, 0
	for range 40 {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), createLoopEnv+"="+root)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(out, make([]byte, len("ready\n"))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(30 * time.Millisecond))))
		cmd.Process.Kill()
		cmd.Wait()
		kills++
	}
	r, err := OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	l, err := r.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range l {
		listed++
		if x.Err != nil || x.State.Status == campaign.StatusEmpty || len(x.State.Generations) == 0 {
			t.Errorf("campaign %s: %s (%v): a directory without its first record", x.ID, x.State.Status, x.Err)
		}
	}
	staged, err := r.Staged()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range staged {
		if err := r.RemoveStaged(s); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d kills: %d campaigns listed (each with its first record), %d creates killed before it (unlisted, swept)", kills, listed, len(staged))
	if len(staged) == 0 {
		t.Log("no kill fell before a first record this time")
	}
}
