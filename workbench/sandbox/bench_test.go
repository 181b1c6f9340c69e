package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/testlatency"
)

// bareSpawn runs `python3 -E -s -c pass` with os/exec, as root: the raw
// limit of every spawn.
func bareSpawn(b *testing.B) {
	cmd := exec.Command(python, "-E", "-s", "-c", "pass")
	if err := cmd.Run(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRunPass: Run of `pass` in an episode's namespaces (the
// launcher's setns, PID and IPC namespaces, the uid switch, the limits
// and the filter, the end of the run) against the bare spawn,
// interleaved. Besides the time, the CPU time of every process each
// made (cpu- and raw-cpu-), which a busy machine does not inflate the
// way it does the time between the launcher's steps.
func BenchmarkRunPass(b *testing.B) {
	ep := testEpisode(b, testSandbox(b, Namespaces))
	var run, raw, runCPU, rawCPU testlatency.Samples
	for i := 0; i < b.N; i++ {
		c0 := childrenCPU()
		raw.Time(func() { bareSpawn(b) })
		c1 := childrenCPU()
		run.Time(func() {
			if _, err := ep.Run(context.Background(), Command{Argv: []string{python, "-E", "-s", "-c", "pass"}, Timeout: 10 * time.Second}); err != nil {
				b.Fatal(err)
			}
		})
		rawCPU, runCPU = append(rawCPU, c1-c0), append(runCPU, childrenCPU()-c1)
	}
	run.Report(b, "")
	raw.Report(b, "raw-")
	runCPU.Report(b, "cpu-")
	rawCPU.Report(b, "raw-cpu-")
}

// BenchmarkForkRunPass: a fork server's run of a script of `pass` (the
// request and pipes, the child's namespaces, the program's set-up as a
// fresh interpreter's, the end of the run) against the bare spawn,
// interleaved; no episode tool around it.
func BenchmarkForkRunPass(b *testing.B) {
	ep := testEpisode(b, testSandbox(b, Namespaces))
	k := ep.ForkServer(ForkServerConfig{Python: python, Env: forkTestEnv}).Forker()
	if err := AsUID(ep.UID(), func() error { return os.WriteFile(filepath.Join(ep.Dir(), ".run.py"), []byte("pass\n"), 0o600) }); err != nil {
		b.Fatal(err)
	}
	c := Command{Argv: []string{python, "-E", "-s", ".run.py"}, Env: forkTestEnv, Timeout: 10 * time.Second}
	if _, err := k.Run(context.Background(), c); err != nil { // the template is up
		b.Fatal(err)
	}
	var run, raw testlatency.Samples
	for i := 0; i < b.N; i++ {
		raw.Time(func() { bareSpawn(b) })
		run.Time(func() {
			if _, err := k.Run(context.Background(), c); err != nil {
				b.Fatal(err)
			}
		})
	}
	run.Report(b, "")
	raw.Report(b, "raw-")
}

// childrenCPU is the user and system time of this process's children
// that ended and were waited for (theirs included, all the way down).
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEpisodeSetup: an episode's namespaces and tmpfs made and
// dropped (NewEpisode and Close: what a reset pays beyond writing the
// task's files), the uid claim and release included.
func BenchmarkEpisodeSetup(b *testing.B) {
	sb := testSandbox(b, Namespaces)
	var s testlatency.Samples
	for i := 0; i < b.N; i++ {
		s.Time(func() {
			ep, err := sb.NewEpisode()
			if err != nil {
				b.Fatal(err)
			}
			if err := ep.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
	s.Report(b, "")
}

// floodToLimit forks until the kernel refuses (the uid's process limit),
// every child forking on, then says so in the workspace and waits.
const floodToLimit = `import os, time
while True:
    try:
        if os.fork() == 0:
            while True:
                try:
                    os.fork()
                except OSError:
                    time.sleep(0.005)
    except OSError:
        break
open("at-limit", "w").close()
time.sleep(1000)
`

// busyLoops starts n processes (root's) that spin until the benchmark
// ends: the load the kill must beat.
func busyLoops(b *testing.B, n int) {
	b.Helper()
	for range n {
		cmd := exec.Command(python, "-c", "while True: pass")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
}

// BenchmarkForkFloodKill: a run that filled the uid's process limit
// (DefaultLimits.Processes) with forking processes, with four busy loops
// per core besides; from the moment the run is ended (its cancel pipe
// closed: a timeout, or the episode's end) until the last of its
// processes is reaped (the launcher exits once the PID namespace is
// empty). make bench bounds its 99th percentile.
func BenchmarkForkFloodKill(b *testing.B) {
	ep := testEpisode(b, testSandbox(b, Namespaces))
	busyLoops(b, 4*runtime.NumCPU())
	marker := filepath.Join(ep.Dir(), "at-limit")
	var s testlatency.Samples
	for i := 0; i < b.N; i++ {
		p, err := ep.start(Command{Argv: []string{python, "-E", "-s", "-c", floodToLimit}})
		if err != nil {
			b.Fatal(err)
		}
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Millisecond) {
			var found bool
			AsUID(ep.UID(), func() error { _, err := os.Lstat(marker); found = err == nil; return nil })
			if found {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the flood never reached the process limit")
			}
		}
		var waitErr error
		s.Time(func() {
			p.stop()
			waitErr = <-p.waited
		})
		if _, err := p.reap(stoppedDeadline, waitErr); err != nil {
			b.Fatal(err)
		}
		if pids, _ := Processes(ep.UID()); len(pids) > 0 {
			b.Fatalf("processes left after the run: %v", pids)
		}
		AsUID(ep.UID(), func() error { return os.Remove(marker) })
	}
	s.Report(b, "")
	b.ReportMetric(float64(DefaultLimits.Processes), "processes")
}

// benchTree makes a workspace-like tree: a few files and a directory.
func benchTree(b *testing.B) string {
	dir := b.TempDir()
	for i := range 8 {
		p := filepath.Join(dir, "d"+strconv.Itoa(i%2), "f"+strconv.Itoa(i)+".py")
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, make([]byte, 2000), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// BenchmarkDigest: the workspace digest of a small task workspace.
func BenchmarkDigest(b *testing.B) {
	dir := benchTree(b)
	var s testlatency.Samples
	for i := 0; i < b.N; i++ {
		s.Time(func() {
			if _, err := Digest(dir, func(string) bool { return false }, DigestBytes); err != nil {
				b.Fatal(err)
			}
		})
	}
	s.Report(b, "")
}

// BenchmarkWalk: a descriptor-based walk of the same tree.
func BenchmarkWalk(b *testing.B) {
	dir := benchTree(b)
	var s testlatency.Samples
	for i := 0; i < b.N; i++ {
		s.Time(func() {
			if err := Walk(dir, func(*Entry) bool { return true }, false, func(*Entry) error { return nil }); err != nil {
				b.Fatal(err)
			}
		})
	}
	s.Report(b, "")
}
