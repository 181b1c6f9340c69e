package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"golang.org/x/sys/unix"
)

// mkdirMode makes dir with exactly mode (umask aside).
func mkdirMode(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

// openRoot returns a temporary directory that others may pass through
// (its parents included), removed at the end.
func openRoot(t *testing.T) string {
	t.Helper()
	root, err := os.MkdirTemp("", "sbx-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { RemoveTree(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestFindWorldWritable: the walk of one mount finds the world-writable
// directories others can reach, lists a nested one only when its parent
// is not world-writable, and never follows a symlink, enters a directory
// others cannot pass through, a sandbox uid's directory, or one past its
// depth bound (which it reports).
func TestFindWorldWritable(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	root := openRoot(t)
	outside := openRoot(t)
	mkdirMode(t, filepath.Join(outside, "ww"), 0o1777)
	for _, d := range []struct {
		rel  string
		mode os.FileMode
	}{
		{"ww", 0o1777},
		{"ww/sub", 0o1777},          // reached through ww
		{"ww/plain", 0o755},         // not world-writable, passable
		{"ww/plain/again", 0o777},   // its parent is not: listed
		{"closed", 0o700},           // others cannot pass
		{"closed/ww", 0o1777},       // so this is unreachable
		{"passable", 0o711},         // others pass, cannot list
		{"passable/ww", 0o1777},     // reachable by name
		{"writeonly", 0o772},        // o+w without o+x: unusable
		{"sandboxed", 0o777},        // a sandbox uid's: see chown
		{"sandboxed/inner", 0o1777}, // never entered
		{"two/deep", 0o755},
		{"two/deep/ww_at_depth_three", 0o777},
	} {
		mkdirMode(t, filepath.Join(root, d.rel), d.mode)
	}
	if err := os.Chown(filepath.Join(root, "sandboxed"), DefaultRange.Base, DefaultRange.Base); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "ww"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	budget := findMaxEntries
	found, skipped := findWorldWritable(root, &budget)
	want := []string{"passable/ww", "two/deep/ww_at_depth_three", "ww", "ww/plain/again"}
	for i := range want {
		want[i] = filepath.Join(root, want[i])
	}
	slices.Sort(found)
	if !slices.Equal(found, want) {
		t.Errorf("found %v\nwant  %v", found, want)
	}
	if len(skipped) != 0 {
		t.Errorf("skipped %v, want nothing", skipped)
	}

	t.Run("depth_bound", func(t *testing.T) {
		deep := openRoot(t)
		p := deep
		for range findMaxDepth + 2 {
			p = filepath.Join(p, "d")
			mkdirMode(t, p, 0o755)
		}
		mkdirMode(t, filepath.Join(p, "ww"), 0o1777)
		budget := findMaxEntries
		found, skipped := findWorldWritable(deep, &budget)
		if len(found) != 0 {
			t.Errorf("found %v below the depth bound", found)
		}
		if len(skipped) != 1 || !strings.Contains(skipped[0], "deeper than") {
			t.Errorf("skipped %v, want one note that the walk stopped at its depth bound", skipped)
		}
	})
	t.Run("entry_bound", func(t *testing.T) {
		budget := 3
		_, skipped := findWorldWritable(root, &budget)
		if len(skipped) != 1 || !strings.Contains(skipped[0], "stopped after") {
			t.Errorf("skipped %v, want one note that the walk ran out of entries", skipped)
		}
	})
}

// TestFindSharedPlaces: from a mount table, read-only mounts and kernel
// file systems are not walked, and a world-writable directory that a
// sandbox uid cannot reach (a directory above its mount point is closed)
// is not kept.
func TestFindSharedPlaces(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	open := openRoot(t)
	mkdirMode(t, filepath.Join(open, "ww"), 0o1777)
	ro := openRoot(t)
	mkdirMode(t, filepath.Join(ro, "ww"), 0o1777)
	proc := openRoot(t)
	mkdirMode(t, filepath.Join(proc, "ww"), 0o1777)
	closed := openRoot(t)
	mkdirMode(t, filepath.Join(closed, "mnt", "ww"), 0o1777)
	os.Chmod(closed, 0o700)
	mounts := []Mount{
		{Point: open, FSType: "ext4", Options: []string{"rw"}, SuperOptions: []string{"rw"}},
		{Point: ro, FSType: "ext4", Options: []string{"ro"}, SuperOptions: []string{"rw"}},
		{Point: proc, FSType: "proc", Options: []string{"rw"}, SuperOptions: []string{"rw"}},
		{Point: filepath.Join(closed, "mnt"), FSType: "tmpfs", Options: []string{"rw"}, SuperOptions: []string{"rw"}},
		{Point: open, FSType: "ext4", Options: []string{"rw"}, SuperOptions: []string{"rw"}}, // walked once
	}
	// The real mqueue mounts, for a container's view of the queues.
	self, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	real, err := ParseMountinfo(self)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range real {
		if m.FSType == "mqueue" {
			mounts = append(mounts, m)
		}
	}
	p, err := FindSharedPlaces(mounts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if want := []string{filepath.Join(open, "ww")}; !slices.Equal(p.Dirs, want) {
		t.Errorf("Dirs %v, want %v", p.Dirs, want)
	}
	if p.Queues == "" {
		t.Error("Queues is empty")
	}
}

// TestDefaultSharedPlaces: this host's places include the usual tmp
// directories that exist and are world-writable, and a view of the
// message queues.
func TestDefaultSharedPlaces(t *testing.T) {
	testenv.RequireRoot(t)
	p, err := DefaultSharedPlaces()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dirs %v; queues: %s; skipped %v", p.Dirs, p.Queues, p.Skipped)
	for _, d := range []string{"/tmp", "/var/tmp", "/dev/shm"} {
		var st unix.Stat_t
		if unix.Stat(d, &st) == nil && worldWritable(&st) && !slices.Contains(p.Dirs, d) {
			t.Errorf("%s is world-writable but not among %v", d, p.Dirs)
		}
	}
	if p.queueDir < 0 && !strings.HasPrefix(p.Queues, "none") {
		t.Errorf("no queue view: %s", p.Queues)
	}
}

// testQueueView returns a view of the POSIX message queues of the test's
// own: a private mount (root on a host), else /dev/mqueue (a container).
func testQueueView(t *testing.T) int {
	t.Helper()
	fd, err := privateQueueMount()
	if err == nil {
		return fd
	}
	fd, err2 := unix.Open("/dev/mqueue", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err2 != nil {
		t.Fatalf("no view of the POSIX message queues: private mount: %v; /dev/mqueue: %v", err, err2)
	}
	return fd
}

// queuesOf lists the POSIX message queues uid owns, through a view of the
// test's own.
func queuesOf(t *testing.T, uid int) []string {
	t.Helper()
	fd := testQueueView(t)
	defer unix.Close(fd)
	dfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	budget := 1 << 20
	names, err := readDirNames(dfd, &budget)
	if err != nil {
		t.Fatal(err)
	}
	var mine []string
	for _, n := range names {
		var st unix.Stat_t
		if unix.Fstatat(dfd, n, &st, 0) == nil && int(st.Uid) == uid {
			mine = append(mine, n)
		}
	}
	slices.Sort(mine)
	return mine
}

// makeQueue makes the POSIX message queue /name owned by uid (mq_open
// gives a new queue the caller's filesystem uid).
func makeQueue(t *testing.T, uid int, name string) {
	t.Helper()
	t.Cleanup(func() { mqUnlink(name) })
	err := AsUID(uid, func() error {
		fd, err := mqOpen(name, unix.O_RDONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
		if err == nil {
			unix.Close(fd)
		}
		return err
	})
	if err != nil {
		t.Fatalf("mq_open /%s as uid %d: %v", name, uid, err)
	}
}

// TestSweep: a uid's files in a shared directory (a deep tree, a locked
// directory, a symlink to a root file) and its POSIX message queues go;
// another uid's and root's stay, and the symlink's target is untouched.
func TestSweep(t *testing.T) {
	a, b := claimUID(t), claimUID(t)
	shared := openRoot(t)
	mkdirMode(t, filepath.Join(shared, "ww"), 0o1777)
	ww := filepath.Join(shared, "ww")
	target := filepath.Join(shared, "root-file")
	mustWrite(t, target, "root")
	mustWrite(t, filepath.Join(ww, "root-in-shared"), "root")
	err := AsUID(a, func() error {
		p := filepath.Join(ww, "a-tree")
		for i := range 300 {
			p = filepath.Join(p, strconv.Itoa(i%10))
		}
		if err := os.MkdirAll(p, 0o700); err != nil {
			return err
		}
		mustWrite(t, filepath.Join(ww, "a-locked", "f"), "x")
		if err := os.Chmod(filepath.Join(ww, "a-locked"), 0); err != nil {
			return err
		}
		return os.Symlink(target, filepath.Join(ww, "a-link"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := AsUID(b, func() error { return os.WriteFile(filepath.Join(ww, "b-file"), []byte("b"), 0o600) }); err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("sbx-test-%d-", os.Getpid())
	makeQueue(t, a, tag+"a1")
	makeQueue(t, a, tag+"a2")
	makeQueue(t, b, tag+"b")

	p := &SharedPlaces{Dirs: []string{ww}, queueDir: testQueueView(t)}
	t.Cleanup(func() { p.Close() })
	if err := p.Sweep(a); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(ww)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"b-file", "root-in-shared"}; !slices.Equal(left, want) {
		t.Errorf("left in the shared directory after a's sweep: %v, want %v", left, want)
	}
	if got, _ := os.ReadFile(target); string(got) != "root" {
		t.Errorf("the link's target changed: %q", got)
	}
	if got := queuesOf(t, a); len(got) != 0 {
		t.Errorf("queues of uid %d left: %v", a, got)
	}
	if got := queuesOf(t, b); !slices.Contains(got, tag+"b") {
		t.Errorf("b's queue went with a's sweep: b has %v", got)
	}
	if err := p.Sweep(b); err != nil {
		t.Fatal(err)
	}
	if got := queuesOf(t, b); len(got) != 0 {
		t.Errorf("queues of uid %d left: %v", b, got)
	}
	if _, err := os.Lstat(filepath.Join(ww, "b-file")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("b's file left after b's sweep: %v", err)
	}
}

// TestSweepProductionCapabilities: with only the workspace container's
// four capabilities (so no private mqueue mount: that needs
// CAP_SYS_ADMIN), the sweep finds the queues through the mqueue mount of
// the mount table, as Docker makes one at /dev/mqueue, and removes the
// uid's; with no such mount it refuses to start (ErrNoQueueView) instead
// of sweeping blind.
func TestSweepProductionCapabilities(t *testing.T) {
	uid := claimUID(t)
	if !hasBoundingCap(t, unix.CAP_SYS_ADMIN) {
		// Already in a workspace container: its four capabilities, and
		// Docker's mqueue mount at /dev/mqueue. No private namespace can be
		// made here, so the refusal without a mount is the host run's to
		// show; the sweep through the mount table is shown here.
		name := fmt.Sprintf("sbx-test-%d-caps", os.Getpid())
		makeQueue(t, uid, name)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"=sweep", "SANDBOX_TEST_UID="+strconv.Itoa(uid))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("sweep with the container's capabilities: %v\n%s", err, out)
		}
		if want := "CapEff:\t00000000000000e1"; !strings.Contains(string(out), want) {
			t.Fatalf("the container does not have exactly SETUID, SETGID, CHOWN, KILL: %s", out)
		}
		if want := "queues: the mqueue mount at /dev/mqueue"; !strings.Contains(string(out), want) {
			t.Errorf("helper output %q, want %q", out, want)
		}
		if got := queuesOf(t, uid); len(got) != 0 {
			t.Errorf("queues of uid %d left: %v", uid, got)
		}
		return
	}
	for _, tool := range []string{"setpriv", "unshare", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s (util-linux) is needed: %v", tool, err)
		}
	}
	name := fmt.Sprintf("sbx-test-%d-caps", os.Getpid())
	makeQueue(t, uid, name)
	mnt := t.TempDir()
	// In a private mount namespace: mount the mqueue file system at mnt
	// (or not), then drop to the four capabilities and sweep.
	script := `set -e
if [ "$1" = mount ]; then mount -t mqueue none "$2"; fi
exec setpriv --bounding-set=-all,+setuid,+setgid,+chown,+kill -- "$3"`
	run := func(mode string) (string, error) {
		cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", mode, mnt, os.Args[0])
		cmd.Env = append(os.Environ(), helperEnv+"=sweep", "SANDBOX_TEST_UID="+strconv.Itoa(uid))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("nomount")
	if err == nil || !strings.Contains(out, ErrNoQueueView.Error()) {
		t.Errorf("without an mqueue mount or CAP_SYS_ADMIN: %v\n%s\nwant a refusal naming %q", err, out, ErrNoQueueView)
	}
	if got := queuesOf(t, uid); !slices.Contains(got, name) {
		t.Fatalf("the queue went without a view: %v", got)
	}
	out, err = run("mount")
	if err != nil {
		t.Fatalf("sweep with the production capabilities: %v\n%s", err, out)
	}
	if want := "CapEff:\t00000000000000e1"; !strings.Contains(out, want) {
		t.Fatalf("the helper did not run with exactly SETUID, SETGID, CHOWN, KILL: %s", out)
	}
	if want := "queues: the mqueue mount at " + mnt; !strings.Contains(out, want) {
		t.Errorf("helper output %q, want %q", out, want)
	}
	if got := queuesOf(t, uid); len(got) != 0 {
		t.Errorf("queues of uid %d left: %v", uid, got)
	}
}

// hasBoundingCap reports whether capability c is in this process's
// bounding set.
func hasBoundingCap(t *testing.T, c int) bool {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "CapBnd:\t"); ok {
			bnd, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatalf("CapBnd %q: %v", v, err)
			}
			return bnd&(1<<c) != 0
		}
	}
	t.Fatal("no CapBnd in /proc/self/status")
	return false
}

// BenchmarkSweep: one sweep of a uid that left nothing, over this host's
// shared places, the cost every run and graded case pays; and the part of
// it the old fixed list paid (its tmp directories and System V IPC).
func BenchmarkSweep(b *testing.B) {
	testenv.RequireRoot(b)
	p, err := DefaultSharedPlaces()
	if err != nil {
		b.Fatal(err)
	}
	// A uid of its own, so no other test's files are swept.
	pool := PoolFor("")
	uid, err := pool.Claim()
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Release(uid)
	b.Run("shared_places", func(b *testing.B) {
		for b.Loop() {
			if err := p.Sweep(uid); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("old_fixed_list", func(b *testing.B) {
		for b.Loop() {
			RemoveSharedTmp(uid, []string{"/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue"})
			RemoveIPC(uid)
		}
	})
}
