// Package custodytest makes, for tests, a campaign whose reports are
// written and signed as the adapter writes them: attested twice and
// removed, or rolled back before its attestation.
package custodytest

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/custody"
	"github.com/agentpen/agentpen/store"
)

// Lifecycle is how a test campaign goes: brought up and attested twice,
// then removed; or rolled back before its attestation.
type Lifecycle struct {
	// Rollback: the bring-up fails before attesting and is rolled back.
	Rollback bool
	// NoFollow: the cleanup's statement names no attestation.
	NoFollow bool
}

// ImageID is the image id the campaign's attestations record.
const ImageID = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

// Campaign makes campaign "demo" in the state root at stateRoot (made
// when missing), its reports written and signed with the root's key as
// the adapter writes them (custody.WriteReport, then the journal record),
// and returns the campaign's directory and the key.
func Campaign(t testing.TB, stateRoot string, lc Lifecycle) (string, ed25519.PrivateKey) {
	t.Helper()
	ctx := t.Context()
	root, err := store.CreateRoot(stateRoot)
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
	if !lc.Rollback {
		app(campaign.Record{Op: campaign.OpAttesting, Gen: 1})
		for _, ok := range []bool{true, false} {
			// A report as Evaluate makes it of a campaign it cannot judge
			// (no daemon record, no plan), with its images set.
			rep := attest.Evaluate(attest.Source{Spec: campaign.CampaignSpec{CampaignID: "demo"}, Records: mustRecords(t, c)},
				attest.Observation{At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
			rep.OK = ok
			rep.Images = []attest.ImageUse{{Reference: "agentpen/workbench:dev", ID: ImageID, Containers: []string{"server"}}}
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
	reason := map[bool]string{true: campaign.ReasonRollback, false: campaign.ReasonDown}[lc.Rollback]
	app(campaign.Record{Op: campaign.OpRemovalStarted, Reason: reason})
	app(campaign.Record{Op: campaign.OpRemoved, Gen: 1, Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: "demo-server", ID: "c1"})
	crep := cleanup.Build(cleanup.Input{CampaignID: "demo", Generations: campaign.Generations(mustRecords(t, c)), Started: time.Unix(0, 0), Finished: time.Unix(1, 0)})
	b, err := crep.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var extra []custody.Subject
	if s, ok := custody.FollowedSubject(mustRecords(t, c), crep.Generation); ok && !lc.NoFollow {
		extra = append(extra, s)
	}
	f, env, err := custody.WriteReport(ctx, c, key, custody.Cleanup, crep.Generation, b, extra...)
	if err != nil {
		t.Fatal(err)
	}
	app(campaign.Record{Op: campaign.OpCleanup, Status: string(crep.Status), Report: f.Name, Digest: f.Digest, Envelope: env})
	if lc.Rollback {
		app(campaign.Record{Op: campaign.OpRolledBack, Gen: 1, Note: "a create failed"})
	}
	return c.Path, key
}

func mustRecords(t testing.TB, c *store.Campaign) []campaign.Record {
	t.Helper()
	recs, _, err := c.Records()
	if err != nil {
		t.Fatal(err)
	}
	return recs
}
