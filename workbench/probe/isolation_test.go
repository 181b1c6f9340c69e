package probe

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testenv"
)

func TestInterfaces(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"lo", "eth0"} {
		os.Mkdir(filepath.Join(dir, n), 0o755)
	}
	got, err := Interfaces(dir)
	if err != nil || !slices.Equal(got, []string{"eth0", "lo"}) {
		t.Fatalf("Interfaces = %v, %v", got, err)
	}
	if _, err := Interfaces(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing directory listed nothing without an error")
	}
}

// TestFindUIDBlock reads the two variables of the listening process from
// a fake /proc, and nothing else of its environment.
func TestFindUIDBlock(t *testing.T) {
	proc := t.TempDir()
	pid := "42"
	os.MkdirAll(filepath.Join(proc, pid, "fd"), 0o755)
	os.MkdirAll(filepath.Join(proc, "net"), 0o755)
	os.WriteFile(filepath.Join(proc, "net", "unix"), []byte("Num RefCount Protocol Flags Type St Inode Path\n0000: 00000002 00000000 00010000 0001 01 777 /run/workbench/wb.sock\n"), 0o644)
	os.Symlink("socket:[777]", filepath.Join(proc, pid, "fd", "3"))
	os.WriteFile(filepath.Join(proc, pid, "cmdline"), []byte("workbench\x00serve\x00"), 0o644)
	os.WriteFile(filepath.Join(proc, pid, "status"), []byte("Uid:\t0\t0\t0\t0\nCapEff:\t0\nCapBnd:\t0\nNoNewPrivs:\t1\nSeccomp:\t2\n"), 0o644)
	write := func(env string) {
		os.WriteFile(filepath.Join(proc, pid, "environ"), []byte(env), 0o644)
	}
	write("AGENTPEN_API_KEY=secret\x00WORKBENCH_UID_BASE=20064\x00WORKBENCH_UID_COUNT=64\x00")
	base, count, err := findUIDBlock(proc, "unix:/run/workbench/wb.sock", 1)
	if err != nil || base != 20064 || count != 64 {
		t.Fatalf("findUIDBlock = %d %d %v", base, count, err)
	}
	for _, env := range []string{"WORKBENCH_UID_BASE=20064\x00", "WORKBENCH_UID_BASE=x\x00WORKBENCH_UID_COUNT=64\x00"} {
		write(env)
		if _, _, err := findUIDBlock(proc, "unix:/run/workbench/wb.sock", 1); err == nil {
			t.Fatalf("environment %q accepted", env)
		}
	}
}

// TestDialAsUID: a unix socket in a root-only directory is reachable by
// root and denied to another uid, even to a caller with every capability.
func TestDialAsUID(t *testing.T) {
	testenv.RequireRoot(t)
	dir := filepath.Join(t.TempDir(), "grader")
	os.Mkdir(dir, 0o700)
	sock := filepath.Join(dir, "grader.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if o, e := dialAs(t.Context(), "unix", sock, time.Second, 0); o != OutcomeConnected {
		t.Fatalf("root: %s %s", o, e)
	}
	if o, e := dialAs(t.Context(), "unix", sock, time.Second, 20063); o != OutcomeDenied {
		t.Fatalf("uid 20063: %s %s, want denied", o, e)
	}
	// The switched thread served only that dial: root still connects.
	if o, _ := dialAs(t.Context(), "unix", sock, time.Second, 0); o != OutcomeConnected {
		t.Fatalf("root after a switched dial: %s", o)
	}
}
