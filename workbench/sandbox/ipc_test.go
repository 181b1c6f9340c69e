package sandbox

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

func capEffLine(status string) string {
	for _, l := range strings.Split(status, "\n") {
		if strings.HasPrefix(l, "CapEff:") {
			return l
		}
	}
	return ""
}

// ipcOf lists the System V objects whose owner or creator is uid.
func ipcOf(t *testing.T, uid int) []string {
	t.Helper()
	var found []string
	for _, k := range ipcKinds {
		data, err := os.ReadFile("/proc/sysvipc/" + k.file)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := ipcObjectsOf(string(data), k.idCol, uid)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			found = append(found, k.file+" "+strconv.Itoa(id))
		}
	}
	return found
}

// TestRemoveIPC: the shared memory segment, message queue and semaphore
// set a uid made outlive its processes; RemoveIPC, run with only the four
// capabilities of production (no CAP_SYS_ADMIN, so root itself may not
// remove them), removes them all, a segment whose owner the uid handed to
// root included.
func TestRemoveIPC(t *testing.T) {
	uid := claimUID(t)
	prefix := productionCaps(t)
	code := `import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
IPC_CREAT, IPC_PRIVATE, IPC_SET, IPC_STAT = 0o1000, 0, 1, 2
shm = libc.shmget(IPC_PRIVATE, 1 << 20, IPC_CREAT | 0o600)
owned_by_root = libc.shmget(IPC_PRIVATE, 1 << 20, IPC_CREAT | 0o600)
ds = ctypes.create_string_buffer(256)
assert libc.shmctl(owned_by_root, IPC_STAT, ds) == 0
ctypes.c_uint32.from_buffer(ds, 4).value = 0
assert libc.shmctl(owned_by_root, IPC_SET, ds) == 0
msg = libc.msgget(IPC_PRIVATE, IPC_CREAT | 0o600)
sem = libc.semget(IPC_PRIVATE, 1, IPC_CREAT | 0o600)
print(min(shm, owned_by_root, msg, sem) >= 0)
`
	res := runPy(t, uid, uidDir(t, uid), code, Limits{}, 10*time.Second)
	t.Cleanup(func() { RemoveIPC(uid) })
	if strings.TrimSpace(string(res.Stdout)) != "True" {
		t.Fatalf("making the objects: %s%s", res.Stdout, res.Stderr)
	}
	// In a workspace container kernel.shm_rmid_forced is 1: segments go
	// with the processes that made them, and only the queue and the
	// semaphore set are left for RemoveIPC.
	want := 4
	if b, err := os.ReadFile("/proc/sys/kernel/shm_rmid_forced"); err == nil && strings.TrimSpace(string(b)) == "1" {
		want = 2
	}
	if got := ipcOf(t, uid); len(got) != want {
		t.Fatalf("want %d objects of uid %d after its processes ended, got %v", want, uid, got)
	}

	argv := append(prefix, os.Args[0])
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), helperEnv+"=rmipc", "SANDBOX_TEST_UID="+strconv.Itoa(uid))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("RemoveIPC with the production capabilities: %v\n%s", err, out)
	}
	if want := "CapEff:\t00000000000000e1"; !strings.Contains(string(out), want) {
		t.Fatalf("the helper did not run with exactly SETUID, SETGID, CHOWN, KILL: %s", out)
	}
	if got := ipcOf(t, uid); len(got) != 0 {
		t.Fatalf("objects of uid %d left: %v", uid, got)
	}
}

func TestIPCObjectsOf(t *testing.T) {
	t.Parallel()
	listing := `       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid
     24244          1   600              33554432  1149  1149      0     0 20001 20001 20001
         0          2   600               1048576  1150  1150      0 20001 20001 20001 20001
         0          3   600               1048576  1151  1151      0 20002 20002 20002 20002
`
	got, err := ipcObjectsOf(listing, "shmid", 20001)
	if err != nil || len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("ipcObjectsOf = %v, %v; want [1 2]", got, err)
	}
	if _, err := ipcObjectsOf("key id perms\n", "shmid", 1); err == nil {
		t.Fatal("a header without the columns was accepted")
	}
}
