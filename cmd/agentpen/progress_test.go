package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/events"
	"github.com/agentpen/agentpen/internal/testkit/lifecycletest"
)

// upSteps are the steps of a small bring-up: its server and two
// workspaces created and ready.
var upSteps = []adapter.Progress{
	{Step: adapter.StepCreated, Role: campaign.RoleServer, Kind: campaign.KindContainer, Name: "srv", Done: 1, Total: 1},
	{Step: adapter.StepCreated, Role: campaign.RoleWork, Kind: campaign.KindContainer, Name: "w0", Done: 1, Total: 2},
	{Step: adapter.StepCreated, Role: campaign.RoleWork, Kind: campaign.KindContainer, Name: "w1", Done: 2, Total: 2},
	{Step: adapter.StepReady, Role: campaign.RoleServer, Kind: campaign.KindContainer, Name: "srv", Done: 1, Total: 1},
	{Step: adapter.StepReady, Role: campaign.RoleWork, Kind: campaign.KindContainer, Name: "w1", Done: 1, Total: 2},
	{Step: adapter.StepReady, Role: campaign.RoleWork, Kind: campaign.KindContainer, Name: "w0", Done: 2, Total: 2},
}

// downSteps are a teardown's.
var downSteps = []adapter.Progress{
	{Step: adapter.StepRemoved, Role: campaign.RoleWork, Kind: campaign.KindContainer, Name: "w0", Done: 1, Total: 2, Outcome: "removed"},
	{Step: adapter.StepRemoved, Role: campaign.RoleServer, Kind: campaign.KindContainer, Name: "srv", Done: 1, Total: 1, Outcome: "removed"},
	{Step: adapter.StepRemoved, Role: campaign.RoleWork, Kind: campaign.KindDir, Name: "/run/x/w0", Done: 2, Total: 2, Outcome: "already gone"},
	{Step: adapter.StepRemoved, Role: campaign.RoleNetwork, Kind: campaign.KindNetwork, Name: "net", Done: 1, Total: 1, Outcome: "removed"},
}

// TestProgressView: the exact text a person sees of up's and down's
// progress on stderr: a line rewritten in place on a terminal (a log line
// clears it first and it is drawn again after), one line per step
// otherwise.
func TestProgressView(t *testing.T) {
	const cr = "\r\033[K"
	for _, tt := range []struct {
		name  string
		tty   bool
		title string
		steps []adapter.Progress
		note  string
		want  string
	}{
		{"up_lines", false, "up demo", upSteps, "attesting",
			"created 1/1 server srv\ncreated 1/2 workspace w0\ncreated 2/2 workspace w1\nready 1/1 server srv\nready 1/2 workspace w1\nready 2/2 workspace w0\nattesting\n"},
		{"up_tty", true, "up demo", upSteps, "attesting",
			"up demo: server created" +
				cr + "up demo: created 1/2 workspaces; server created" +
				cr + "up demo: created 2/2 workspaces; server created" +
				cr + "up demo: created 2/2 workspaces; server ready" +
				cr + "up demo: created 2/2, ready 1/2 workspaces; server ready" +
				cr + "up demo: created 2/2, ready 2/2 workspaces; server ready" +
				cr + "up demo: created 2/2, ready 2/2 workspaces; server ready; attesting\n"},
		{"down_lines", false, "down demo", downSteps, "",
			"removed 1/2 workspace container w0\nremoved 1/1 server container srv\nremoved 2/2 workspace directory /run/x/w0 (already gone)\nremoved 1/1 network net\n"},
		{"down_tty", true, "down demo", downSteps, "",
			"down demo: removed workspace 1/2" + cr + "down demo: removed server 1/1, workspace 1/2" + cr +
				"down demo: removed server 1/1, workspace 2/2" + cr + "down demo: removed server 1/1, workspace 2/2, network 1/1\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			v := newProgressView(&b, tt.tty, false, tt.title)
			for _, p := range tt.steps {
				v.step(p)
			}
			if tt.note != "" {
				v.say(tt.note)
			}
			v.finish()
			if got := b.String(); got != tt.want {
				t.Fatalf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
	t.Run("log_line_on_tty", func(t *testing.T) {
		var b bytes.Buffer
		v := newProgressView(&b, true, false, "up demo")
		v.step(upSteps[1])
		slog.New(slog.NewTextHandler(v, &slog.HandlerOptions{ReplaceAttr: noTime})).Warn("slow")
		v.finish()
		want := "up demo: created 1/2 workspaces" + cr + "level=WARN msg=slow\nup demo: created 1/2 workspaces\n"
		if b.String() != want {
			t.Fatalf("got\n%q\nwant\n%q", b.String(), want)
		}
	})
}

func noTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// TestProgressViewJSON: with --log-format json the steps are the
// journal's events, one JSON record each, in the schema of the API's
// event stream (events.Event, nothing left over), in the journal's order,
// and nothing is rewritten; the adapter's progress calls write nothing of
// their own.
func TestProgressViewJSON(t *testing.T) {
	var b bytes.Buffer
	v := newProgressView(&b, true, true, "up demo")
	v.log = slog.New(slog.NewJSONHandler(v, nil))
	for _, p := range upSteps {
		p.CampaignID = "demo"
		v.step(p)
	}
	if b.Len() != 0 {
		t.Fatalf("progress steps wrote records of their own:\n%s", b.String())
	}
	h := lifecycletest.New(lifecycletest.Spec("demo"), campaign.PlanOptions{}, "/run/x")
	h.Begin(1).Op(campaign.OpAttesting, 1).Attested(1, campaign.AttestOK).Note("prose")
	for i, r := range h.Records {
		r.Seq, r.Time = i+1, time.Date(2026, 12, 1, 0, 0, i, 0, time.UTC)
		h.Records[i] = r
		v.journalled("demo", r)
	}
	v.finish()
	want := events.FromRecords("demo", h.Records)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != len(want) || len(want) != 1+6+2 || strings.Contains(b.String(), "\r") {
		t.Fatalf("%d lines for %d events:\n%s", len(lines), len(want), b.String())
	}
	for i, l := range lines {
		var ev events.Event
		dec := json.NewDecoder(strings.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, l)
		}
		if !reflect.DeepEqual(ev, want[i]) {
			t.Fatalf("line %d is %+v, want %+v", i, ev, want[i])
		}
	}
}

// TestUpSummary: the exact summary up prints at the end.
func TestUpSummary(t *testing.T) {
	res := upResult{CampaignID: "demo", Generation: 1, StateDir: "/state/campaigns/demo-1a2b", Topology: "none",
		Server: upServer{ContainerID: strings.Repeat("ab", 32)}, Attestation: upAttestation{OK: true, Report: "/state/campaigns/demo-1a2b/attestation-1-1.json"}}
	for i, agent := range []string{"a0", "a1"} {
		res.Workspaces = append(res.Workspaces, adapter.Workspace{Workspace: api.Workspace{Index: i, AgentID: agent, Socket: "/run/user/1001/agentpen/i-1/" + agent + "/wb.sock"}})
	}
	var b bytes.Buffer
	upSummary{res: res, took: 9876 * time.Millisecond, checks: 120, down: "agentpen down demo"}.print(&b)
	want := `campaign demo is up: generation 1, 2 workspaces, topology none, in 9.9s
  grader        container abababababab
  workspace 0   agent a0, socket /run/user/1001/agentpen/i-1/a0/wb.sock
  workspace 1   agent a1, socket /run/user/1001/agentpen/i-1/a1/wb.sock
attestation     ok, 120 checks passed
reports         /state/campaigns/demo-1a2b (journal.jsonl, spec-1.json, attestation-1-1.json; a cleanup report after down)
play by hand    workbench client /run/user/1001/agentpen/i-1/a0/wb.sock
take it down    agentpen down demo
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	// A big campaign stays on one screen.
	for i := 2; i < 30; i++ {
		res.Workspaces = append(res.Workspaces, adapter.Workspace{Workspace: api.Workspace{Index: i, AgentID: "x", Socket: "/s"}})
	}
	b.Reset()
	upSummary{res: res, took: time.Second, checks: 1, down: "agentpen down demo"}.print(&b)
	if n := strings.Count(b.String(), "\n"); n != 17 || !strings.Contains(b.String(), "  ... and 20 more workspaces (every socket: the JSON on stdout, or agentpen ls --json)\n") {
		t.Fatalf("%d lines:\n%s", n, b.String())
	}
}

// TestCleanupSummary: the exact text down prints: what it removed, by
// kind and role, and how long it took.
func TestCleanupSummary(t *testing.T) {
	e := func(k campaign.Kind, role string) cleanup.Entry { return cleanup.Entry{Kind: k, Role: role} }
	rep := &cleanup.Report{CampaignID: "demo", Status: cleanup.Verified, Timings: cleanup.Timings{TotalMS: 2345},
		Removed: []cleanup.Entry{e(campaign.KindContainer, campaign.RoleServer), e(campaign.KindContainer, campaign.RoleWork),
			e(campaign.KindContainer, campaign.RoleWork), e(campaign.KindDir, campaign.RoleWork), e(campaign.KindDir, campaign.RoleWork), e(campaign.KindDir, campaign.RoleServer)}}
	var b bytes.Buffer
	printCleanup(&b, rep, "/state/campaigns/demo-1a2b/cleanup.json", false)
	want := `cleanup of demo: verified in 2.35s
  removed       3 containers (1 server, 2 workspace), 3 directories
  report        /state/campaigns/demo-1a2b/cleanup.json
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}
