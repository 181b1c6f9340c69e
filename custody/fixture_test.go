package custody_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/custody"
	"github.com/agentpen/agentpen/internal/beneath"
	"github.com/agentpen/agentpen/store"
)

const imageID = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

// lifecycle is how a test campaign goes: brought up and attested twice,
// then removed; or rolled back before its attestation.
type lifecycle struct {
	// rollback: the bring-up fails before attesting and is rolled back.
	rollback bool
	// noFollow: the cleanup's statement names no attestation.
	noFollow bool
}

// signedCampaign makes a state root holding campaign "demo", its reports
// written and signed as the adapter writes them (custody.WriteReport, then
// the journal record), and returns the campaign's directory and the key.
func signedCampaign(t *testing.T, lc lifecycle) (string, ed25519.PrivateKey) {
	t.Helper()
	ctx := t.Context()
	root, err := store.CreateRoot(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	key, err := root.SigningKey()
	if err != nil {
		t.Fatal(err)
	}
	c, err := root.Create("demo")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	j, err := c.OpenJournal()
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	app := func(r campaign.Record) {
		t.Helper()
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WriteSpec(1, campaign.CampaignSpec{CampaignID: "demo"}); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteDaemon(1, attest.DaemonRecord{ID: "daemon-1", Rootless: true, Endpoint: "unix:///run/user/1000/docker.sock"}); err != nil {
		t.Fatal(err)
	}
	app(campaign.Record{Op: campaign.OpBegin, Gen: 1, Instance: "i1"})
	app(campaign.Record{Op: campaign.OpIntent, Gen: 1, Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: "demo-server"})
	app(campaign.Record{Op: campaign.OpCreated, Gen: 1, Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: "demo-server", ID: "c1"})
	if !lc.rollback {
		app(campaign.Record{Op: campaign.OpAttesting, Gen: 1})
		for _, ok := range []bool{true, false} {
			// A report as Evaluate makes it of a campaign it cannot judge
			// (no daemon record, no plan), with its images set.
			rep := attest.Evaluate(attest.Source{Spec: campaign.CampaignSpec{CampaignID: "demo"}, Records: mustRecords(t, c)},
				attest.Observation{At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
			rep.OK = ok
			rep.Images = []attest.ImageUse{{Reference: "agentpen/workbench:dev", ID: imageID, Containers: []string{"server"}}}
			b, err := rep.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			f, env, err := custody.WriteReport(ctx, c, key, custody.Attestation, 1, b, custody.ImageSubjects(rep)...)
			if err != nil {
				t.Fatal(err)
			}
			status := map[bool]string{true: campaign.AttestOK, false: campaign.AttestFailed}[ok]
			app(campaign.Record{Op: campaign.OpAttested, Gen: 1, Status: status, Report: f.Name, Digest: f.Digest, Envelope: env})
		}
	}
	reason := map[bool]string{true: campaign.ReasonRollback, false: campaign.ReasonDown}[lc.rollback]
	app(campaign.Record{Op: campaign.OpRemovalStarted, Reason: reason})
	app(campaign.Record{Op: campaign.OpRemoved, Gen: 1, Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: "demo-server", ID: "c1"})
	crep := cleanup.Build(cleanup.Input{CampaignID: "demo", Generations: campaign.Generations(mustRecords(t, c)), Started: time.Unix(0, 0), Finished: time.Unix(1, 0)})
	b, err := crep.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var extra []custody.Subject
	if s, ok := custody.FollowedSubject(mustRecords(t, c), crep.Generation); ok && !lc.noFollow {
		extra = append(extra, s)
	}
	f, env, err := custody.WriteReport(ctx, c, key, custody.Cleanup, crep.Generation, b, extra...)
	if err != nil {
		t.Fatal(err)
	}
	app(campaign.Record{Op: campaign.OpCleanup, Status: string(crep.Status), Report: f.Name, Digest: f.Digest, Envelope: env})
	if lc.rollback {
		app(campaign.Record{Op: campaign.OpRolledBack, Gen: 1, Note: "a create failed"})
	}
	return c.Path, key
}

func mustRecords(t *testing.T, c *store.Campaign) []campaign.Record {
	t.Helper()
	recs, _, err := c.Records()
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// copyDir copies a campaign's directory to a new one, for tampering.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-a", dir, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	return dst
}

// verifyDir verifies the campaign in dir as agentpen verify does.
func verifyDir(t *testing.T, dir string, pub ed25519.PublicKey, opts custody.Options) *custody.Result {
	t.Helper()
	d, err := beneath.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	return custody.Verify(context.Background(), d, pub, opts)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sha256Sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
