// Package sandbox runs untrusted agent code as an unprivileged, per-episode
// uid and cleans up after it: the uid pool, the launcher that drops
// privileges, the /proc-scan kill, the sweep of the shared places, and the
// descriptor-based file walks (tree removal, workspace digest, safe open)
// the workbench needs to touch files agent code could have booby-trapped.
//
// # Uids
//
// Each live episode holds one uid in UIDBase..UIDBase+UIDSlots-1. A Pool
// hands them out in rotation; a uid is held by an exclusive flock(2) on
// <lock dir>/<uid>, in a directory only the server's user may write
// (0700), so two workbench processes on one machine never hand out the
// same uid and a process that dies frees its uids with its descriptors.
//
// # Running code
//
// Run starts the current binary again (os.Executable) as a launcher, in a
// new session. The launcher, still root, sets the per-run rlimits (Limits:
// processes of the uid, file size, open files, CPU seconds, address
// space), drops supplementary groups, sets gid and uid, sets umask 077 and
// no_new_privs, changes into the workspace (as the uid, so root needs no
// access to it) and execs the program with the environment it was given.
// prlimit(2) on the child from outside is not used: it needs
// CAP_SYS_RESOURCE and races the child's start. Every binary that calls
// Run must call RunLauncherIfRequested first thing in main (and in
// TestMain); it returns at once unless the process was started as a
// launcher, and never returns when it was.
//
// When Run returns, no process of the uid is left: the process group and
// then, each round, kill(-1) sent from a thread whose effective uid is the
// episode's and real uid KillerRealUID (atomic with respect to fork, so a
// chain of processes that each fork a successor and exit cannot slip
// between a /proc listing and the status reads; the real uid is not the
// episode's, so the uid's processes cannot signal that thread, and no
// process may run as KillerRealUID), then every process whose real,
// effective, saved or filesystem uid is the episode's are sent SIGKILL,
// scanning /proc until a scan finds none
// (bounded; zombies are not counted, but a zombie leader whose other
// threads still run is). Each pid the scan found is pinned with a pidfd
// and its uids read again before the signal goes through the pidfd, so a
// pid reused meanwhile (even by one of this server's threads) is never
// hit. Every thread whose ids are switched (AsUID, RemoveIPC,
// KillAllOfUID) is a locked thread other than the main thread: the main
// thread's credentials are the process's for /proc and for signal
// permission checks, so switching it would expose the server to the
// uid's kill, and to another workbench process's kill(-1). Matching on the uids in
// /proc/<pid>/status, not on the owner of /proc/<pid>, also finds a process
// that made itself non-dumpable.
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
//   - CAP_SETUID: the launcher's setuid, setfsuid in AsUID, and the
//     thread's setresuid in RemoveIPC and KillAllOfUID (KillerRealUID must
//     be mapped in a user namespace);
//   - CAP_SETGID: the launcher's setgroups([]) and setgid, and setfsgid;
//   - CAP_CHOWN: giving a new workspace directory to the uid, and handing a
//     directory of the uid's in a shared tmp directory that still holds
//     another uid's files to root (RemoveSharedTmp);
//   - CAP_KILL: the process-group and /proc-scan kills.
//
// DAC_OVERRIDE, DAC_READ_SEARCH and FOWNER are not needed: the root side
// only makes the episode's home (root-owned, 0711) and its workspace
// directory (mkdir, chmod, then chown), removes both with rmdir/unlink in
// directories root owns, and does everything inside the workspace as the
// uid.
//
// Without root (Available reports false) there is no uid: code runs as
// the server's own user, still in a new session with the rlimits other than
// the process count, and only its process group is killed, as the seed
// does.
package sandbox
