package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
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

// BenchmarkRunPass: Run of `pass` as a uid (filter, uid switch, launcher
// limits, the kill) against the bare spawn, interleaved.
func BenchmarkRunPass(b *testing.B) {
	uid := claimUIDB(b)
	ws := uidDirB(b, uid)
	var run, raw testlatency.Samples
	for i := 0; i < b.N; i++ {
		raw.Time(func() { bareSpawn(b) })
		run.Time(func() {
			if _, err := Run(context.Background(), Command{Argv: []string{python, "-E", "-s", "-c", "pass"}, Dir: ws, UID: uid, Timeout: 10 * time.Second}); err != nil {
				b.Fatal(err)
			}
		})
	}
	run.Report(b, "")
	raw.Report(b, "raw-")
}

// BenchmarkKillIdle: KillUntilNone of a uid with nothing running (what
// every run, case and reset pays), against the full /proc status scan
// (Processes) the kill used to run each round, interleaved.
func BenchmarkKillIdle(b *testing.B) {
	uid := claimUIDB(b)
	var kill, scan testlatency.Samples
	for i := 0; i < b.N; i++ {
		scan.Time(func() {
			if _, err := Processes(uid); err != nil {
				b.Fatal(err)
			}
		})
		kill.Time(func() {
			if err := KillUntilNone(uid); err != nil {
				b.Fatal(err)
			}
		})
	}
	kill.Report(b, "")
	scan.Report(b, "raw-")
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

// BenchmarkTmpSweep: Sweep of a uid that left nothing (what every case and
// reset pays).
func BenchmarkTmpSweep(b *testing.B) {
	uid := claimUIDB(b)
	var s testlatency.Samples
	for i := 0; i < b.N; i++ {
		s.Time(func() {
			if err := Sweep(uid); err != nil {
				b.Fatal(err)
			}
		})
	}
	s.Report(b, "")
}

func claimUIDB(b *testing.B) int {
	b.Helper()
	testenv.RequireRoot(b)
	p := PoolFor("")
	uid, err := p.Claim()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { KillUntilNone(uid); p.Release(uid) })
	return uid
}

func uidDirB(b *testing.B, uid int) string {
	b.Helper()
	home, err := os.MkdirTemp("", "sbx-bench-")
	if err != nil {
		b.Fatal(err)
	}
	os.Chmod(home, 0o711)
	ws := filepath.Join(home, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		b.Fatal(err)
	}
	if err := os.Lchown(ws, uid, uid); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		AsUID(uid, func() error { return EmptyDir(ws) })
		os.Remove(ws)
		os.Remove(home)
	})
	return ws
}
