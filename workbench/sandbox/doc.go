// Package sandbox runs untrusted code as an unprivileged, per-episode uid
// and cleans up after it: the uid pool, Run (credentials, syscall filter
// and rlimits without a Go re-exec), the signal-based kill, the
// sweep of the shared places (world-writable directories, System V IPC,
// POSIX message queues), and the descriptor-based file walks
// (tree removal, workspace digest, safe open) the workbench needs to touch
// files agent code could have booby-trapped. It does not isolate the
// network, the filesystem view or other users' /proc entries: that is the
// container's job.
//
// # Uids
//
// The process's uids are a Range: DefaultRange (20000..21024), or the
// block a campaign gave the workspace (WORKBENCH_UID_BASE and
// WORKBENCH_UID_COUNT, set once at start with SetRange), so two agents'
// episode code never shares a kernel uid. Each live episode holds one uid
// of the range but its last (the killer's). A Pool hands them out in
// rotation; a uid is held by an exclusive flock(2) on
// <lock dir>/<uid>, in a directory only the server's user may write
// (0700), so two workbench processes on one machine never hand out the
// same uid and a process that dies frees its uids with its descriptors. A
// uid whose processes were still exiting when its episode ended is
// retired (Pool.Retire): held until a later Claim finds none alive.
//
// # Running code
//
// Run starts the program through the spawner: one OS thread of the
// server's (never the main thread), locked to its goroutine for the life
// of the process, that set no_new_privs and installed the syscall filter
// on itself alone, once. os/exec forks from the calling thread, and the
// child inherits both, keeps them across exec and passes them to
// everything it starts; no other thread of the server has them (the Go
// runtime never starts a thread from a locked one). The child, still
// root, does what SysProcAttr asks: a new session, setgroups([]), setgid
// and setuid to the episode's uid, and chdir into the workspace as the
// uid. It then execs the launcher, and the launcher execs the program.
//
// The launcher is not Go: a static ELF of about 200 bytes of machine code
// (testdata/launcher_amd64.s; amd64 only, Run fails with ErrLaunch
// elsewhere) with the run's limits in a table after the code, kept in a
// sealed memfd per set of limits and executed through /proc/self/fd. It
// sets the rlimits (Limits: processes of the uid, file size, open files,
// CPU seconds, address space; POSIX message queue bytes always 0) and
// umask 077 on itself, closes every descriptor above 3 and makes 3 (its
// error pipe) close-on-exec, and execs argv. So the limits hold from the
// program's first instruction; rlimits are per process, so they cannot be
// set on the forking thread, and prlimit(2) from outside needs
// CAP_SYS_RESOURCE and races the child. Its exec costs tens of
// microseconds where a Go launcher's runtime start-up cost about 1.5 ms.
//
// The syscall filter (filter.go, docs/sandbox-filter.md) denies with EPERM
// what Docker's default profile denies and the standard library does not
// need, and the kernel keyrings besides: it is the same on a bare host
// and, stacked on Docker's, in a container. Calls through another
// architecture's ABI (i386 int 0x80, x32) get ENOSYS, and so does clone3
// (its flags cannot be inspected; glibc falls back to clone, whose
// namespace flags are denied).
//
// # The kill
//
// When Run returns, no process of the uid is alive. KillUntilNone repeats
// rounds until none is or KillDeadline passes, sleeping briefly between
// rounds once everything was signalled. Each round runs on a locked
// thread whose effective uid is the episode's and real uid the range's
// Killer:
// kill(-1, SIGKILL) from there reaches exactly the processes whose real or
// saved uid is the episode's (or the killer's, which no process may run
// as), atomically with respect to fork, so a chain of processes that each
// fork a successor and exit cannot slip past; the real uid is not the
// episode's, so the uid's processes cannot signal that thread. The same
// thread then lists /proc and sends signal 0 to each pid: only the pids it
// may signal are the uid's (non-dumpable ones included, since the check is
// on credentials, not on /proc ownership), and only their status is read,
// to tell zombies (not counted) from live processes (a zombie leader
// whose other threads still run counts). kill(-1) itself cannot prove
// none is left: it returns 0 whenever any other process exists, signalled
// or not. Processes that all have SIGKILL pending at the deadline are
// only exiting (ErrStillExiting): Run returns normally, and the episode
// retires the uid instead of releasing it. Every thread whose ids are
// switched (AsUID, RemoveIPC, the kill) is a locked thread other than the
// main thread: the main thread's credentials are the process's for /proc
// and for signal permission checks, so switching it would expose the
// server to the uid's kill, and to another workbench process's kill(-1).
// Processes reads every process's status (matching real, effective,
// saved or filesystem uid); tests use it as an independent view.
//
// # Files as the uid
//
// Every operation on a workspace or on the uid's files in the shared tmp
// directories runs through AsUID: on a locked OS thread whose filesystem
// uid and gid (setfsuid(2), setfsgid(2)) are the episode's. The kernel then
// checks permissions as the uid (root's file capabilities are dropped from
// the thread while it is not fsuid 0) and files it creates belong to the
// uid. So the server never reads or writes through a link to a file the
// uid could not reach itself, and it needs no DAC_OVERRIDE or FOWNER.
//
// # Shared places
//
// Outside its workspace, episode code can leave something for a later run
// or episode wherever every uid may write. Sweep removes all of a uid's:
//   - its files, at any depth, in every world-writable directory of the
//     mount table: DefaultSharedPlaces walks every writable mount that
//     holds files (not proc, sysfs, cgroup and the like) once, at the first
//     call, bounded in depth and entries, never through a symlink, never
//     into another mount or a directory others cannot pass through, and
//     keeps each world-writable directory a sandbox uid can write
//     (faccessat as UIDBase). On a Debian host that is /tmp, /var/tmp,
//     /dev/shm and /run/lock; in the workspace container the tmpfs
//     mounts. A directory made world-writable after the first call, or
//     writable by the uids only through an ACL, is not found;
//   - its POSIX message queues, which mq_open makes whether or not the
//     mqueue file system is mounted anywhere: they are listed through a
//     private mount of it attached nowhere (fsopen/fsmount, root on a
//     host: CAP_SYS_ADMIN), else through an mqueue mount of the mount
//     table that shows a queue this process makes (Docker mounts one at
//     /dev/mqueue in every container). With neither, DefaultSharedPlaces
//     fails (ErrNoQueueView) rather than sweep blind;
//   - its System V IPC objects (RemoveIPC, below).
//
// The files and queues are removed as the uid (AsUID), so the kernel lets
// the sweep remove the uid's own entries only, never another uid's or
// root's, and never follows a link to a place the uid could not reach.
//
// # System V IPC
//
// Shared memory segments, message queues and semaphore sets outlive the
// processes that made them, and a segment pins memory no rlimit counts.
// RemoveIPC removes every object whose owner or creator is the uid; the
// kernel lets only that effective uid (or CAP_SYS_ADMIN) do it, so it
// switches the effective uid of one locked OS thread (setresuid on that
// thread, real and saved uid stay 0) and back. The workbench calls it
// through Sweep.
//
// # Capabilities
//
// Running as root in a container, the sandbox needs exactly these four:
//   - CAP_SETUID: the child's setuid, setfsuid in AsUID, and the
//     thread's setresuid in RemoveIPC and the kill (the range's killer
//     must be mapped in a user namespace);
//   - CAP_SETGID: the child's setgroups([]) and setgid, and setfsgid;
//   - CAP_CHOWN: giving a new workspace directory to the uid, and handing a
//     directory of the uid's in a shared tmp directory that still holds
//     another uid's files to root (RemoveSharedTmp);
//   - CAP_KILL: the process-group kill of the program's session.
//
// DAC_OVERRIDE, DAC_READ_SEARCH and FOWNER are not needed: the root side
// only makes the episode's home (root-owned, 0711) and its workspace
// directory (mkdir, chmod, then chown), removes both with rmdir/unlink in
// directories root owns, and does everything inside the workspace as the
// uid.
//
// Without root (Available reports false) there is no uid: code runs as
// the server's own user, still in a new session with the filter and the
// rlimits other than the process count, and only its process group is
// killed, as the seed does.
package sandbox
