package adapter

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/internal/testkit/fakedriver"
)

// streamPlan is an attestation's plan in small: the grader probed before
// and after two workspaces.
func streamPlan() []attest.Exec {
	cmd := []string{"probe"}
	x := func(phase, subject, id, batch string) attest.Exec {
		return attest.Exec{Phase: phase, Subject: subject, ContainerID: id, Command: cmd, Batch: batch, Cmd: append(slices.Clone(cmd), "--batch", batch)}
	}
	return []attest.Exec{
		x(attest.PhaseBefore, "server", "srv", "before"),
		x(attest.PhaseMain, "w0", "c0", "w0"),
		x(attest.PhaseMain, "w1", "c1", "w1"),
		x(attest.PhaseAfter, "server", "srv", "after"),
	}
}

// streamEngine is an engine whose fake runtime streams execs, each run
// by answer (its id, its stdin and stdout), the events it logs in order.
func streamEngine(answer func(id string, in *bufio.Scanner, out io.Writer, log func(string)) (int, error)) (*Adapter, *[]string, *[][]string) {
	var mu sync.Mutex
	var events []string
	var cmds [][]string
	log := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	d := &fakedriver.Driver{
		InfoFunc: func(i driver.Info) driver.Info { i.StreamingExec = true; return i },
		ExecFunc: func(ctx context.Context, id string, cmd []string, opts driver.ExecOptions) (driver.ExecResult, error) {
			mu.Lock()
			cmds = append(cmds, cmd)
			mu.Unlock()
			if opts.Stdin == nil || opts.Stdout == nil {
				return driver.ExecResult{ExitCode: -1}, errors.New("not streamed")
			}
			code, err := answer(id, bufio.NewScanner(opts.Stdin), opts.Stdout, log)
			return driver.ExecResult{ExitCode: code}, err
		},
	}
	return &Adapter{Driver: d}, &events, &cmds
}

// echo answers each batch with "ok:" and it, logging when it got it and
// when it answered.
func echo(id string, in *bufio.Scanner, out io.Writer, log func(string)) (int, error) {
	for in.Scan() {
		log("got " + in.Text())
		time.Sleep(10 * time.Millisecond)
		log("answered " + in.Text())
		fmt.Fprintf(out, "ok:%s\n", in.Text())
	}
	return 0, nil
}

// TestStreamedProbesKeepThePhases: one process per container, and no
// batch of a phase is sent before every batch of the phase before was
// answered: the grader's counters still bracket every workspace's probes.
func TestStreamedProbesKeepThePhases(t *testing.T) {
	a, events, cmds := streamEngine(echo)
	execs := streamPlan()
	runs := a.runProbes(t.Context(), execs, attest.ProbeEnv{})
	if len(*cmds) != 3 {
		t.Fatalf("%d execs, want one per container: %q", len(*cmds), *cmds)
	}
	for _, c := range *cmds {
		if !slices.Equal(c, []string{"probe", "--batches"}) {
			t.Errorf("exec %q, want the probe with --batches", c)
		}
	}
	at := func(e string) int {
		i := slices.Index(*events, e)
		if i < 0 {
			t.Fatalf("no %q among %q", e, *events)
		}
		return i
	}
	for _, w := range []string{"w0", "w1"} {
		if at("got "+w) < at("answered before") {
			t.Errorf("%s's batch sent before the grader's first was answered: %q", w, *events)
		}
		if at("got after") < at("answered "+w) {
			t.Errorf("the grader's last batch sent before %s's was answered: %q", w, *events)
		}
	}
	for i, r := range runs {
		if r.Phase != execs[i].Phase || r.Subject != execs[i].Subject || r.Stdout != "ok:"+execs[i].Batch+"\n" || r.ExitCode != 0 || r.Err != "" {
			t.Errorf("run %d: %+v, want the answer to %q", i, r, execs[i].Batch)
		}
	}
}

// TestStreamedProbesFailClosed: a process that never started, one that
// never answers, one that ends before its last batch and one that answers
// a batch twice fail the runs they did not answer (or all of theirs), and
// the phases after them still run.
func TestStreamedProbesFailClosed(t *testing.T) {
	defer func(m time.Duration) { probeExecMargin = m }(probeExecMargin)
	probeExecMargin = 0
	for _, tt := range []struct {
		name string
		// answer replaces echo for the container it names.
		id     string
		answer func(id string, in *bufio.Scanner, out io.Writer, log func(string)) (int, error)
		failed []int  // the runs that must fail (the others answered)
		err    string // what its error says (one of |-separated words)
	}{
		{"never_started", "c0", func(string, *bufio.Scanner, io.Writer, func(string)) (int, error) {
			return -1, errors.New("exec create: no such container")
		}, []int{1}, "no such container"},
		{"silent", "c1", func(_ string, in *bufio.Scanner, _ io.Writer, _ func(string)) (int, error) {
			for in.Scan() {
			}
			return 0, nil
		}, []int{2}, "did not answer"},
		{"ends_early", "srv", func(_ string, in *bufio.Scanner, out io.Writer, _ func(string)) (int, error) {
			in.Scan()
			fmt.Fprintf(out, "ok:%s\n", in.Text())
			return 0, nil
		}, []int{3}, "ended before it answered|took no batch"},
		{"answers_twice", "c0", func(_ string, in *bufio.Scanner, out io.Writer, _ func(string)) (int, error) {
			for in.Scan() {
				fmt.Fprintf(out, "ok:%s\nok:%s\n", in.Text(), in.Text())
			}
			return 0, nil
		}, []int{1}, "more lines"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, events, _ := streamEngine(func(id string, in *bufio.Scanner, out io.Writer, log func(string)) (int, error) {
				if id == tt.id {
					return tt.answer(id, in, out, log)
				}
				return echo(id, in, out, log)
			})
			execs := streamPlan()
			done := make(chan []attest.ProbeRun, 1)
			go func() { done <- a.runProbes(t.Context(), execs, attest.ProbeEnv{TimeoutMS: 200}) }()
			var runs []attest.ProbeRun
			select {
			case runs = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the probes never ended")
			}
			for i, r := range runs {
				if slices.Contains(tt.failed, i) {
					if r.Err == "" || !slices.ContainsFunc(strings.Split(tt.err, "|"), func(e string) bool { return strings.Contains(r.Err, e) }) || r.ExitCode != -1 {
						t.Errorf("run %d: %+v, want it failed: %q", i, r, tt.err)
					}
					continue
				}
				if r.Err != "" || r.Stdout != "ok:"+execs[i].Batch+"\n" {
					t.Errorf("run %d: %+v, want its answer", i, r)
				}
			}
			if tt.id != "srv" && !slices.Contains(*events, "got after") {
				t.Errorf("the last phase never ran: %q", *events)
			}
		})
	}
}
