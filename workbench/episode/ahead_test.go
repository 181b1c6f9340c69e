package episode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/oracle"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/workbench/sandbox"
	"github.com/agentpen/agentpen/workbench/tasks"
)

// releases records the uids an environment's episodes released, each
// checked contained first (assertContained), and can hold one release
// back until the test lets it go.
type releases struct {
	mu   sync.Mutex
	uids []int
	hold int // this uid's release waits for gate
	gate chan struct{}
	held chan struct{} // closed once the held release waits
}

func watchReleases(env *Environment, t *testing.T) *releases {
	r := &releases{hold: -2, gate: make(chan struct{}), held: make(chan struct{})}
	env.testHookBeforeRelease = func(uid int) {
		assertContained(t, uid)
		r.mu.Lock()
		hold := uid == r.hold
		r.mu.Unlock()
		if hold {
			close(r.held)
			<-r.gate
		}
		r.mu.Lock()
		r.uids = append(r.uids, uid)
		r.mu.Unlock()
	}
	return r
}

func (r *releases) list() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.uids...)
}

func (r *releases) released(uid int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range r.uids {
		if u == uid {
			return true
		}
	}
	return false
}

// prepared waits for the workspace env made ahead and returns it (nil
// when none is being made).
func prepared(env *Environment) *workspace {
	env.mu.Lock()
	p := env.next
	env.mu.Unlock()
	if p == nil {
		return nil
	}
	<-p.done
	return p.ws
}

func submitCSV(t *testing.T, env *Environment) Observation {
	t.Helper()
	task, err := tasks.Build(taskCSV)
	if err != nil {
		t.Fatal(err)
	}
	o := step(t, env, "submit", map[string]any{"answer": task.Key.Answer})
	if !o.Done || o.Metadata["correctness"] != 1.0 {
		t.Fatalf("submit: %+v", o)
	}
	return o
}

// TestEpisodeMadeAhead: the answer that ends an episode does not wait for
// its teardown; once it is torn down (contained, its uid released) the
// next episode's workspace, with its fork server, is made, one at most,
// and the next reset plays in it; a reset that replaces a running episode
// makes none ahead; Close frees the one made ahead.
func TestEpisodeMadeAhead(t *testing.T) {
	requireRoot(t)
	env := newEnv(t, Config{})
	r := watchReleases(env, t)
	reset(t, env, taskCSV)
	step(t, env, "run_python", map[string]any{"code": "print(1)"})
	first := env.ws.uid
	r.mu.Lock()
	r.hold = first
	r.mu.Unlock()

	answered := make(chan Observation, 1)
	go func() {
		o, err := env.Step(context.Background(), call(t, "submit", map[string]any{"answer": "no"}))
		if err != nil {
			t.Error(err)
		}
		answered <- o
	}()
	select {
	case o := <-answered:
		if !o.Done {
			t.Fatalf("submit did not end the episode: %+v", o)
		}
	case <-testenv.Context(t).Done():
		t.Fatal("the answer that ended the episode waited for its teardown")
	}
	<-r.held // the teardown has begun: nothing is made ahead until it ends
	env.mu.Lock()
	if env.next == nil {
		t.Error("nothing is being made ahead after the episode ended")
	}
	env.mu.Unlock()
	close(r.gate)
	next := prepared(env)
	if next == nil {
		t.Fatal("no workspace made ahead")
	}
	if !r.released(first) {
		t.Fatalf("uid %d was not released before the next episode's was claimed (released %v)", first, r.list())
	}
	assertUIDFree(t, env.cfg.Sandbox.Pool(), first)
	if next.uid == first || next.fs == nil || next.runs == nil {
		t.Fatalf("the workspace made ahead: uid %d (ended: %d), fork server %v", next.uid, first, next.fs)
	}
	if !next.fs.WaitReady(context.Background()) {
		t.Fatalf("the fork server made ahead is not up: %v", next.fs.Err())
	}

	// The next reset plays in it, its first run forked, and makes no other.
	reset(t, env, taskCSV)
	if env.ws != next {
		t.Fatal("the reset did not take the workspace made ahead")
	}
	if prepared(env) != nil {
		t.Fatal("a second workspace is made ahead while an episode runs")
	}
	forked := next.fs.Forked()
	wantIn(t, "run in the workspace made ahead", step(t, env, "run_python", map[string]any{"code": "print(open('sales.csv').read()[:6])"}).Output, "order_")
	if next.fs.Forked() != forked+1 {
		t.Fatalf("the first run after the reset was spawned (%v)", next.fs.Err())
	}

	// A reset that replaces a running episode tears it down in the
	// background and makes none ahead.
	second := env.ws.uid
	reset(t, env, taskCSV)
	if prepared(env) != nil {
		t.Fatal("a workspace is made ahead after a reset that replaced an episode")
	}
	submitCSV(t, env)
	ahead := prepared(env)
	if ahead == nil {
		t.Fatal("no workspace made ahead")
	}
	if err := env.Close(); err != nil {
		t.Fatal(err)
	}
	for _, uid := range []int{first, second, ahead.uid} {
		if !r.released(uid) {
			t.Errorf("uid %d not released through cleanup (released %v)", uid, r.list())
		}
		assertUIDFree(t, env.cfg.Sandbox.Pool(), uid)
	}
}

// TestOneEpisodeMakesNoneAhead: an environment of one episode (a
// stateless call's) makes nothing ahead when its episode ends.
func TestOneEpisodeMakesNoneAhead(t *testing.T) {
	requireRoot(t)
	env := newEnv(t, Config{})
	env.OneEpisode()
	reset(t, env, taskCSV)
	submitCSV(t, env)
	if prepared(env) != nil {
		t.Fatal("a workspace was made ahead")
	}
}

// TestResetWithOneUID: with every uid held by the running episode, a
// reset that replaces it tears it down first and plays in its uid, as
// before anything was made ahead.
func TestResetWithOneUID(t *testing.T) {
	requireRoot(t)
	var sb *sandbox.Sandbox
	var err error
	// A range of one episode uid no other test holds (New claims it once).
	for base := 60000 + os.Getpid()%2000*2; sb == nil; base += 2 {
		sb, err = sandbox.New(sandbox.Config{Range: sandbox.Range{Base: base, Count: 2}})
		if err != nil && !errors.Is(err, sandbox.ErrNoFreeUID) || base > 65000 {
			t.Fatalf("sandbox of one uid at %d: %v", base, err)
		}
	}
	env := newEnv(t, Config{Sandbox: sb})
	reset(t, env, taskCSV)
	uid := env.ws.uid
	reset(t, env, taskCSV)
	if env.ws.uid != uid {
		t.Fatalf("uid %d, want the only one, %d", env.ws.uid, uid)
	}
	submitCSV(t, env)
	if ws := prepared(env); ws == nil || ws.uid != uid {
		t.Fatalf("made ahead: %v", ws)
	}
	reset(t, env, taskCSV)
	wantIn(t, "a run", step(t, env, "run_python", map[string]any{"code": "import os; print(os.getuid())"}).Output, fmt.Sprint(uid))
}

// TestCompileAhead: the episodes' fork server program is compiled ahead
// in a sandbox of namespaces (the fork servers' own, which then serve a
// code task's runs); nothing is with NoForkServer or where no fork server
// starts.
func TestCompileAhead(t *testing.T) {
	testenv.RequireRoot(t)
	sb, err := sandbox.New(sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Sandbox: sb}
	if !cfg.CompileAhead() {
		t.Fatal("not compiled ahead in namespaces")
	}
	env := newEnv(t, cfg)
	reset(t, env, "software/median@2")
	if !env.ws.fs.WaitReady(context.Background()) {
		t.Fatalf("the fork server sent the program compiled ahead is not up: %v", env.ws.fs.Err())
	}
	step(t, env, "run_python", map[string]any{"code": "print(6 * 7)"})
	if env.ws.fs.Forked() != 1 {
		t.Fatalf("the run after the compile ahead was not forked: %v", env.ws.fs.Err())
	}
	if (Config{Sandbox: sb, NoForkServer: true}).CompileAhead() {
		t.Error("compiled ahead with NoForkServer")
	}
	uidOnly, err := sandbox.New(sandbox.Config{Mode: sandbox.UIDOnly})
	if err != nil {
		t.Fatal(err)
	}
	if (Config{Sandbox: uidOnly}).CompileAhead() || (Config{}).CompileAhead() {
		t.Error("compiled ahead where no fork server starts")
	}
}

// TestOneCallForksOnlyGraded: an environment of one call (a stateless
// call's) starts no fork server for the agent's one run, which is
// spawned; a graded sequence starts one, and its cases fork from it once
// it is up.
func TestOneCallForksOnlyGraded(t *testing.T) {
	requireRoot(t)
	env := newEnv(t, Config{})
	env.OneCall()
	reset(t, env, taskMedian)
	wantIn(t, "a run", step(t, env, "run_python", map[string]any{"code": "print(6 * 7)"}).Output, "42")
	if env.ws.fs != nil {
		t.Fatal("a fork server was started for one run")
	}
	solution, err := oracle.Load(taskMedian)
	if err != nil {
		t.Fatal(err)
	}
	step(t, env, "write_file", map[string]any{"path": "solution.py", "content": solution})
	wantIn(t, "run_tests", step(t, env, "run_tests", nil).Output, "graded: 3 of 3")
	fs := env.ws.fs
	if fs == nil || !fs.WaitReady(context.Background()) {
		t.Fatalf("no fork server for the graded cases (%v)", fs)
	}
	forked := fs.Forked()
	wantIn(t, "run_tests again", step(t, env, "run_tests", nil).Output, "graded: 3 of 3")
	if fs.Forked() < forked+3 || fs.Err() != nil {
		t.Fatalf("the graded cases were not forked (%d forked before, %d after: %v)", forked, fs.Forked(), fs.Err())
	}
}
