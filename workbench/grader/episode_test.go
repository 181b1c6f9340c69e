package grader

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/fakeclock"
	"github.com/agentpen/agentpen/internal/testkit/oracle"
	"github.com/agentpen/agentpen/internal/testkit/sandboxtest"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/workbench/episode"
	"github.com/agentpen/agentpen/workbench/results"
	"github.com/agentpen/agentpen/workbench/tasks"
	"github.com/google/go-cmp/cmp"
)

// seen is what an agent sees of one observation, plus the reward.
type seen struct {
	Tool      string
	Output    string
	Error     string
	StepsLeft int
	Done      bool
	Reward    float64
	Metadata  map[string]any
}

// episodeRun plays tool calls on one environment and records every
// observation.
type episodeRun struct {
	t    *testing.T
	env  *episode.Environment
	seen []seen
}

func newRun(t *testing.T, cfg episode.Config, taskID string) *episodeRun {
	t.Helper()
	cfg.Sandbox = sandboxtest.Shared(t)
	env, err := episode.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	obs, err := env.Reset(context.Background(), episode.ResetOptions{TaskID: taskID})
	if err != nil {
		t.Fatalf("Reset(%s): %v", taskID, err)
	}
	r := &episodeRun{t: t, env: env}
	r.record("reset", obs)
	return r
}

func (r *episodeRun) record(tool string, o episode.Observation) seen {
	s := seen{Tool: tool, Output: o.Output, Error: o.Error, StepsLeft: o.StepsLeft, Done: o.Done, Reward: o.Reward, Metadata: o.Metadata}
	r.seen = append(r.seen, s)
	return s
}

func (r *episodeRun) step(tool string, argv map[string]any) seen {
	r.t.Helper()
	a := episode.Action{Tool: tool, Args: map[string]json.RawMessage{}}
	for k, v := range argv {
		b, err := json.Marshal(v)
		if err != nil {
			r.t.Fatal(err)
		}
		a.Args[k] = b
	}
	o, err := r.env.Step(context.Background(), a)
	if err != nil {
		r.t.Fatalf("Step(%s): %v", tool, err)
	}
	return r.record(tool, o)
}

// stepper is r.step as an oracle.Stepper.
func (r *episodeRun) stepper(tool string, args map[string]any) (oracle.Result, error) {
	o := r.step(tool, args)
	return oracle.Result{Output: o.Output, Error: o.Error, Done: o.Done, Reward: o.Reward}, nil
}

// oracleCode is the oracle of taskID's family (oracle.Load).
func oracleCode(t *testing.T, taskID string) string {
	t.Helper()
	code, err := oracle.Load(taskID)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// playNaive plays a wrong or partial episode: the planted bug submitted
// as it is, or a wrong check and a partial (or wrong) answer.
func playNaive(r *episodeRun, task *tasks.Task) {
	if task.Kind == tasks.KindCode {
		r.step("read_file", map[string]any{"path": "solution.py"})
		r.step("submit", map[string]any{"answer": "as it is"})
		return
	}
	r.step("check", map[string]any{"answer": "0"})
	answer := "no idea"
	if len(task.Key.Items) > 1 {
		answer = strings.Join(task.Key.Items[1:], "\n") + "\nnot-an-item"
	}
	r.step("submit", map[string]any{"answer": answer})
}

// TestRemoteGradesAsInProcess plays every family of the catalogue
// (variant 0) twice, with the in-process grader and with a Client of a
// grader service: the oracle episode (reward 1) and a naive one (wrong or
// partial answers). Every observation, reward included, must be the same
// both ways. Every byte the remote side received from the grader is
// recorded; afterwards no hidden case's expected value and no stored
// answer may be among them (see assertNoKeys for the rule).
func TestRemoteGradesAsInProcess(t *testing.T) {
	testenv.RequireRoot(t)
	start := time.Now()
	ts := newTestServer(t, testKey)
	rec := &recorder{next: &http.Transport{}}
	client, err := NewClient(ClientConfig{URL: ts.url, Key: testKey, Transport: rec})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var played []*tasks.Task
	t.Run("families", func(t *testing.T) {
		for _, id := range tasks.IDs() {
			t.Run(strings.ReplaceAll(id, "/", "_"), func(t *testing.T) {
				t.Parallel()
				task, err := tasks.Build(id)
				if err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				played = append(played, task)
				mu.Unlock()
				code := oracleCode(t, id)
				for _, script := range []struct {
					name string
					play func(*episodeRun)
				}{
					{"oracle", func(r *episodeRun) {
						if _, err := oracle.Play(task.Kind, task.Instruction, code, task.Files[0].Path, r.stepper); err != nil {
							r.t.Errorf("%s: %v", id, err)
						}
					}},
					{"naive", func(r *episodeRun) { playNaive(r, task) }},
				} {
					local := newRun(t, episode.Config{}, id)
					script.play(local)
					remote := newRun(t, episode.Config{Grader: client}, id)
					script.play(remote)
					l, r := normalize(local.seen), normalize(remote.seen)
					if diff := cmp.Diff(l, r); diff != "" {
						t.Errorf("%s %s: in-process (-) and remote (+) differ:\n%s", id, script.name, diff)
					}
					final := l[len(l)-1]
					if !final.Done {
						t.Errorf("%s %s: the episode did not end: %+v", id, script.name, final)
					}
					if script.name == "oracle" && final.Reward != 1 {
						t.Errorf("%s oracle: reward %v, want 1: %+v", id, final.Reward, final)
					}
				}
			})
		}
	})
	if t.Failed() {
		return
	}
	assertNoKeys(t, played, rec)
	t.Logf("%d families, 4 episodes each, in %v; %d grader replies recorded", len(played), time.Since(start), rec.count())
}

// homePath is an episode's home, which differs between two episodes (each
// has its own uid).
var homePath = regexp.MustCompile(`/run/agent-workbench/homes/[^/\s'"]+`)

func normalize(s []seen) []seen {
	out := append([]seen(nil), s...)
	for i := range out {
		out[i].Output = homePath.ReplaceAllString(out[i].Output, "HOME")
		out[i].Error = homePath.ReplaceAllString(out[i].Error, "HOME")
	}
	return out
}

// assertNoKeys checks the bytes the remote side received from the grader
// (status lines, headers, bodies) for the answer keys of the tasks
// played: every hidden case's expected value of a code task (as JSON
// text, with and without HTML escaping, and a string's raw text) and
// every stored answer and item of the others (raw and as a JSON string).
//
// The rule, so chance matches do not count: a value is looked for only
// when its text is distinctive, that is at least 4 bytes long or holding
// a non-digit; a number is looked for as a whole token (not inside a
// longer number such as a credit of 0.8571), and in bodies only (a Date
// or Content-Length header is made of digits the grader did not take
// from a key); and a value is skipped when the grader must send it
// anyway: when it occurs in the hidden arguments of any task played
// (which /v1/cases returns by design; the recording spans all tasks) or in
// one of the fixed reasons. The test fails if
// fewer than half of the values are left to check.
func assertNoKeys(t *testing.T, played []*tasks.Task, rec *recorder) {
	t.Helper()
	all := rec.all()
	bodies := rec.bodyList()
	if rec.count() == 0 || len(all) == 0 {
		t.Fatal("nothing recorded")
	}
	reasons := strings.Join([]string{tasks.ReasonCorrect, tasks.ReasonNotANumber, tasks.ReasonWrongNumber, tasks.ReasonWrongText,
		tasks.ReasonMissing, tasks.ReasonExtra, tasks.ReasonMissingExtra, tasks.ReasonOrder, tasks.ReasonWrongItems,
		tasks.ReasonExamplesFail, tasks.ReasonHiddenPartial, tasks.ReasonNoCases, tasks.ReasonCodeKind}, "\n")
	checked, skipped := 0, 0
	look := func(task *tasks.Task, disclosed string, forms ...string) {
		for _, f := range forms {
			if f == "" {
				continue
			}
			numeric := strings.Trim(f, "0123456789.-+eE") == ""
			if len(f) < 4 && numeric {
				skipped++
				continue
			}
			if strings.Contains(disclosed, f) || strings.Contains(reasons, f) {
				skipped++
				continue
			}
			checked++
			if numeric {
				tok := regexp.MustCompile(`(^|[^0-9.eE+-])` + regexp.QuoteMeta(f) + `($|[^0-9.eE])`)
				for _, b := range bodies {
					if tok.Match(b) {
						t.Errorf("%s: a grader reply holds the key value %s: %s", task.TaskID, f, b)
					}
				}
				continue
			}
			if strings.Contains(all, f) {
				t.Errorf("%s: the grader's replies hold the key value %q", task.TaskID, f)
			}
		}
	}
	var args []any
	for _, task := range played {
		for _, h := range task.Key.Hidden {
			args = append(args, h.Args)
		}
	}
	disclosed := strings.Join(jsonForms(args), "\n")
	for _, task := range played {
		if task.Kind == tasks.KindCode {
			for _, h := range task.Key.Hidden {
				look(task, disclosed, jsonForms(h.Want)...)
			}
			continue
		}
		for _, v := range append([]string{task.Key.Answer}, task.Key.Items...) {
			if v != "" {
				look(task, disclosed, append(jsonForms(v), v)...)
			}
		}
	}
	t.Logf("key values looked for: %d; skipped by the rule: %d", checked, skipped)
	if checked < skipped || checked < 100 {
		t.Fatalf("only %d key values checked (%d skipped): the test proves too little", checked, skipped)
	}
}

// jsonForms is v as JSON text with and without HTML escaping, and, for a
// string, its raw text.
func jsonForms(v any) []string {
	esc, _ := json.Marshal(v)
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	forms := []string{string(esc), strings.TrimSuffix(b.String(), "\n")}
	if s, ok := v.(string); ok {
		forms = append(forms, s)
	}
	return forms
}

// switchable serves a grader handler on a fixed loopback address that a
// test can take down (listener closed, connections cut) and bring back.
type switchable struct {
	t    *testing.T
	addr string
	h    http.Handler
	hs   *http.Server
	done chan struct{}
}

func newSwitchable(t *testing.T, h http.Handler) *switchable {
	t.Helper()
	s := &switchable{t: t, h: h}
	s.up()
	t.Cleanup(s.down)
	return s
}

func (s *switchable) up() {
	s.t.Helper()
	addr := s.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		s.t.Fatalf("listen %s: %v", addr, err)
	}
	s.addr = ln.Addr().String()
	s.hs = &http.Server{Handler: s.h}
	s.done = make(chan struct{})
	go func() { s.hs.Serve(ln); close(s.done) }()
}

func (s *switchable) down() {
	if s.hs == nil {
		return
	}
	s.hs.Close()
	<-s.done
	s.hs = nil
}

// TestGraderOutageVoids: a grader that goes away mid-episode, or fails
// or hangs on one route, voids that episode at its submit: it ends with
// no credit, saying grading failed (grader_failed) and naming neither the
// grader's address nor its key, and its result says error; a step after
// it is refused. Once the grader is back, the next episode is graded.
// (A refusal used to keep the episode running, with what its graded
// cases left in it.)
func TestGraderOutageVoids(t *testing.T) {
	testenv.RequireRoot(t)
	srv, err := NewServer(ServerConfig{Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	type fault int
	const (
		none fault = iota
		hangJudge
		failJudge
	)
	var mu sync.Mutex
	current := none
	clk := fakeclock.New()
	var client *Client
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		f := current
		mu.Unlock()
		if r.URL.Path == RouteJudge && f != none {
			if f == failJudge {
				writeError(w, http.StatusServiceUnavailable, "unavailable", "grader restarting")
				return
			}
			// It never answers; meanwhile the client's clock passes
			// its timeout (the attempt's timer is set before the
			// request is sent).
			clk.Advance(client.timeout)
			<-r.Context().Done()
			return
		}
		srv.Handler().ServeHTTP(w, r)
	})
	sw := newSwitchable(t, handler)
	// The client's attempts time out on a fake clock, only when the hung
	// judge advances it: no other call can time out, however slow the
	// machine.
	client, err = NewClient(ClientConfig{URL: "http://" + sw.addr, Key: testKey, Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	client.clock = clk
	code, _ := tasks.Build("software/median")
	text, _ := tasks.Build("logs/error_count")
	for _, tt := range []struct {
		name    string
		task    *tasks.Task
		outage  func()
		restore func()
		reason  string
	}{
		{name: "down_at_score", task: text, outage: sw.down, restore: sw.up},
		{name: "down_at_cases", task: code, outage: sw.down, restore: sw.up},
		{name: "judge_unavailable", task: code,
			outage:  func() { mu.Lock(); current = failJudge; mu.Unlock() },
			restore: func() { mu.Lock(); current = none; mu.Unlock() }},
		{name: "judge_hangs", task: code,
			outage:  func() { mu.Lock(); current = hangJudge; mu.Unlock() },
			restore: func() { mu.Lock(); current = none; mu.Unlock() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var ends []string
			r := newRun(t, episode.Config{Grader: client, OnEnd: func(rec results.Record) { ends = append(ends, rec.End+" "+rec.Reason) }}, tt.task.TaskID)
			answer := keyAnswer(tt.task)
			if tt.task.Kind == tasks.KindCode {
				answer = "fixed"
				r.step("read_file", map[string]any{"path": "solution.py"})
				r.step("write_file", map[string]any{"path": "solution.py", "content": oracleCode(t, "software/median")})
				if o := r.step("run_tests", nil); o.Error != "" {
					t.Fatalf("run_tests: %+v", o)
				}
			} else {
				r.step("read_file", map[string]any{"path": tt.task.Files[0].Path})
				if o := r.step("check", map[string]any{"answer": answer}); !strings.HasPrefix(o.Output, "check: correct") {
					t.Fatalf("check: %+v", o)
				}
			}
			tt.outage()
			o := r.step("submit", map[string]any{"answer": answer})
			tt.restore()
			want := "grading failed (" + results.ReasonGrader + ")"
			if !strings.HasPrefix(o.Error, want) || !o.Done || o.Reward != 0 || o.Metadata["correctness"] != nil {
				t.Fatalf("submit during the outage: %+v, want %q, done, no credit", o, want)
			}
			if strings.Contains(o.Error, sw.addr) || strings.Contains(o.Error, testKey) {
				t.Errorf("the answer names the grader's address or key: %q", o.Error)
			}
			if fmt.Sprint(ends) != "[error "+results.ReasonGrader+"]" {
				t.Errorf("results %v, want the episode's, error %s", ends, results.ReasonGrader)
			}
			if o = r.step("submit", map[string]any{"answer": answer}); !o.Done || !strings.Contains(o.Error, "refused") {
				t.Fatalf("submit after the void: %+v, want it refused", o)
			}
			if _, err := r.env.Reset(context.Background(), episode.ResetOptions{TaskID: tt.task.TaskID}); err != nil {
				t.Fatal(err)
			}
			if tt.task.Kind == tasks.KindCode {
				r.step("write_file", map[string]any{"path": "solution.py", "content": oracleCode(t, "software/median")})
			}
			if o = r.step("submit", map[string]any{"answer": answer}); !o.Done || o.Metadata["correctness"] != 1.0 {
				t.Fatalf("the next episode's submit, the grader back: %+v, want it graded", o)
			}
		})
	}
}

var _ = strconv.Itoa
