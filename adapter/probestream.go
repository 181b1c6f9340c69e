package adapter

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/attest"
)

// probePhases are the attestation's phases, in order: the grader read
// before the workspaces are probed, the workspaces, the grader after.
var probePhases = []string{attest.PhaseBefore, attest.PhaseMain, attest.PhaseAfter}

// probeStream is one container's probe process on a runtime that streams
// an exec (Capabilities.StreamingExec): the execs of the plan it answers,
// in phase order, each phase's batch a line of its stdin, sent when the
// phase begins, and each answer a line of its stdout.
type probeStream struct {
	id    string
	cmd   []string
	execs []int // indices into the plan's execs
}

// runProbesStreamed runs the plan's execs as one process per container,
// all started at once (at most attestParallelism at a time, in the order
// of their first phase): a phase begins once every exec of the phase
// before answered, and each process gets its batch of a phase when the
// phase begins, so no probe of a phase runs before every probe of the
// phase before it ended, as phase by phase; the processes' start is paid
// once and at the same time. ok is false for a plan it does not run (an
// exec without its command and batch, or too many containers with more
// than one phase to hold a slot each and still make progress): the caller
// runs it phase by phase.
func (a *Adapter) runProbesStreamed(ctx context.Context, execs []attest.Exec, timeout time.Duration, privileged bool) (runs []attest.ProbeRun, ok bool) {
	runs = make([]attest.ProbeRun, len(execs))
	var streams []*probeStream
	byID := map[string]*probeStream{}
	for _, phase := range probePhases {
		for i, x := range execs {
			if x.Phase != phase {
				continue
			}
			runs[i] = attest.ProbeRun{Phase: x.Phase, Subject: x.Subject}
			if x.ContainerID == "" {
				runs[i].Err = "no container id"
				continue
			}
			if len(x.Command) == 0 || x.Batch == "" {
				return nil, false
			}
			s := byID[x.ContainerID]
			if s == nil {
				s = &probeStream{id: x.ContainerID, cmd: append(slices.Clone(x.Command), "--batches")}
				byID[x.ContainerID] = s
				streams = append(streams, s)
			}
			if !slices.Equal(s.cmd[:len(s.cmd)-1], x.Command) {
				return nil, false
			}
			s.execs = append(s.execs, i)
		}
	}
	// A process of several phases holds its slot while it waits for the
	// later ones: one slot at least must stay for the others.
	multi := 0
	for _, s := range streams {
		if len(s.execs) > 1 {
			multi++
		}
	}
	if multi >= attestParallelism {
		return nil, false
	}

	open := map[string]chan struct{}{}
	answered := map[string]*sync.WaitGroup{}
	for _, phase := range probePhases {
		open[phase], answered[phase] = make(chan struct{}), &sync.WaitGroup{}
	}
	for _, s := range streams {
		for _, i := range s.execs {
			answered[execs[i].Phase].Add(1)
		}
	}
	// Each answer comes within its probes' timeout and a margin, as an
	// exec of one phase does.
	perPhase := timeout + probeExecMargin
	sem := make(chan struct{}, attestParallelism)
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, s := range streams {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				a.runProbeStream(ctx, s, execs, runs, perPhase, privileged, open, answered)
			})
		}
	})
	for _, phase := range probePhases {
		close(open[phase])
		answered[phase].Wait()
	}
	wg.Wait()
	return runs, true
}

// runProbeStream runs one container's probe process: it starts it, sends
// each of its batches once its phase is open, records the answer line in
// runs and marks it answered (answered or not: a process that ended,
// would not take a batch or did not answer within perPhase fails the runs
// it did not answer, and is stopped), and once the last is sent closes
// its stdin and records how it exited.
func (a *Adapter) runProbeStream(ctx context.Context, s *probeStream, execs []attest.Exec, runs []attest.ProbeRun, perPhase time.Duration, privileged bool,
	open map[string]chan struct{}, answered map[string]*sync.WaitGroup) {
	// It lives at most as long as every phase may take.
	ectx, cancel := context.WithTimeout(ctx, time.Duration(len(probePhases))*perPhase)
	defer cancel()
	inR, inW := io.Pipe()
	out := newLineWriter(len(s.execs))
	type end struct {
		res driver.ExecResult
		err error
	}
	ended := make(chan end, 1)
	go func() {
		res, err := a.Driver.Exec(ectx, s.id, s.cmd, driver.ExecOptions{Privileged: privileged, Stdin: inR, Stdout: out})
		// A batch being sent to a process that never started, or ended,
		// is refused rather than waited for.
		inR.Close()
		out.close()
		ended <- end{res, err}
	}()
	var lost string // why the runs from here on have no answer
	got := make([]bool, len(s.execs))
	for k, i := range s.execs {
		x := execs[i]
		<-open[x.Phase]
		if lost == "" {
			if _, err := io.WriteString(inW, x.Batch+"\n"); err != nil {
				lost = "the probe took no batch: " + err.Error()
			}
		}
		if lost == "" {
			t := time.NewTimer(perPhase)
			select {
			case line, ok := <-out.lines:
				if ok {
					runs[i].Stdout, got[k] = line+"\n", true
				} else {
					lost = "the probe ended before it answered"
				}
			case <-t.C:
				lost = fmt.Sprintf("the probe did not answer within %s", perPhase)
				cancel()
			}
			t.Stop()
		}
		answered[x.Phase].Done()
	}
	inW.Close()
	e := <-ended
	for k, i := range s.execs {
		r := &runs[i]
		r.ExitCode = e.res.ExitCode
		switch {
		case e.err != nil:
			r.ExitCode, r.Err = -1, e.err.Error()
		case out.extra():
			r.ExitCode, r.Err = -1, fmt.Sprintf("the probe printed more lines than the %d batches it was sent", len(s.execs))
		case !got[k] && e.res.ExitCode == 0:
			r.ExitCode, r.Err = -1, lost
		case !got[k]:
			r.Stdout = truncate(e.res.Stderr, 500)
		}
	}
}

// lineWriter splits what is written to it into lines, each sent on lines
// (buffered for the lines expected: a line past them is counted, never
// waited for).
type lineWriter struct {
	lines chan string
	want  int
	mu    sync.Mutex
	buf   []byte
	n     int
}

func newLineWriter(want int) *lineWriter {
	return &lineWriter{lines: make(chan string, want), want: want}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.send(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

func (w *lineWriter) send(line string) {
	w.n++
	select {
	case w.lines <- line:
	default:
	}
}

// close sends what is left (a line without its end) and closes lines.
func (w *lineWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.send(string(w.buf))
		w.buf = nil
	}
	close(w.lines)
}

// extra reports whether more lines came than were expected.
func (w *lineWriter) extra() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n > w.want
}
