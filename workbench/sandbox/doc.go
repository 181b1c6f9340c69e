// Package sandbox runs untrusted code for the workbench's episodes: each
// episode's code as its own unprivileged uid, in namespaces of its own,
// with a syscall filter and rlimits from its first instruction; a fork
// server per episode that runs Python scripts by forking one interpreter;
// the uid pool; and the descriptor-based file walks (tree removal, workspace
// digest, safe open) the server needs to touch files agent code could
// have booby-trapped. It does not limit memory or CPU beyond the rlimits
// (no cgroups), nor hide the container's /proc from episodes (see
// "Mount").
//
// A Sandbox is built once (New, from a Config value: the mode, the uid
// Range, the lock directory, the tmpfs size); it hands out Episodes. The
// only process-wide state is the filter program (built once) and what
// the kernel keeps per thread (onOwnThread).
//
// # Modes
//
//   - Namespaces (the default, as root): everything below.
//   - UIDOnly (only when asked for; weaker): the episode's uid, the
//     filter and the rlimits, in the server's namespaces. A run ends by
//     killing the uid (KillAllOfUID: atomic, but it does not wait for the
//     processes to finish exiting); episode code shares the server's
//     network (the server refuses its connections at accept), sees other
//     episodes' processes, and what it leaves in /tmp, /var/tmp,
//     /dev/shm, System V IPC or POSIX queues is not removed.
//   - Unsandboxed (not root): the server's own user, a session, the
//     filter and the rlimits but the process count, as the seed.
//
// # Uids
//
// The uids are a Range: DefaultRange (20000..21024), or the block a
// campaign gave the workspace (WORKBENCH_UID_BASE and WORKBENCH_UID_COUNT,
// read by cmd/workbench), so two agents' episode code never shares a
// kernel uid. Each live episode holds one uid of the range but its last
// (the uid-only kill's). A Pool hands them out in rotation; a uid is held
// by an exclusive flock(2) on <lock dir>/<uid>, in a directory only root
// may write (0700), on a file system episode code cannot write (in
// namespaces it can write only its own tmpfs), so two workbench processes
// on one machine never hand out the same uid and a process that dies
// frees its uids with its descriptors.
//
// # Namespaces
//
// NewEpisode (package episode makes one ahead of each reset) clones a
// set-up process into a new user namespace that maps the episode's uid
// to itself and nothing else (uid 0 is not mapped: that would need
// CAP_SETFCAP), a new mount namespace and a new network namespace. The
// set-up process keeps
// CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_SETUID and CAP_SETGID across its exec
// as ambient capabilities, which count in that user namespace only, and
// runs setupTable: every mount it inherited becomes read-only and private
// (mount_setattr, recursive); a tmpfs of EpisodeBytes and EpisodeInodes
// is mounted on WorkspaceDir, and in it, as the uid, three directories
// are made and bound over /tmp, /dev/shm and WorkspaceDir itself (over
// the tmpfs's root, so nothing else of it is reachable and the workspace,
// a mount point, cannot be renamed away); the loopback interface comes
// up. The server then opens the three namespaces and the three
// directories through the set-up process's /proc entry, and lets it exit:
// no process keeps an idle episode's namespaces, its descriptors do, and
// Close frees everything, tmpfs included. The workspace is reached as
// /proc/self/fd/N/. (Dir), always as the uid (AsUID).
//
// Every run of the episode enters those namespaces and makes two of its
// own: a PID namespace and an IPC namespace (a new network namespace per
// run costs about 1.7 ms, per episode it is paid once; PID and IPC
// namespaces cost microseconds). Its launcher process enters the user,
// mount and network namespaces (setns through the descriptors; the owner
// of a user namespace has every capability in it), unshares PID and IPC,
// and forks twice: the PID namespace's init (pid 1: it drops its
// capabilities, closes every descriptor, ignores SIGCHLD so the kernel
// reaps the orphans it inherits, and pauses) and the program (pid 2: it
// makes a session, drops its groups, becomes the uid, enters the
// workspace, sets the rlimits, umask 077, no_new_privs and the filter,
// and execs). The launcher waits for the program to exit or for its
// cancel pipe to be closed (a timeout, a cancelled context, or the server
// dying); then it kills the init, and the kernel kills every process of
// the namespace at once, however many there are and however busy the
// machine: no rounds, no scan, no deadline. The launcher reaps the
// program and then the init, whose exit completes only when the namespace
// is empty, reports the program's status, and exits. So when Run returns
// no process of the run is alive, its output pipes are closed, and its
// System V and POSIX IPC objects are gone with its IPC namespace.
//
// What of the episode persists between its runs: its workspace, /tmp and
// /dev/shm (ClearScratch empties the last two, before graded cases), and
// its network namespace, which keeps a little of processes that are gone
// (a port in TIME_WAIT; a socket bound and kept alive by descriptors in
// flight until the kernel collects it): a run with Command.OwnNetwork (a
// graded case) gets one of its own, its loopback interface up.
// Episode code reaches no other network: only its own loopback, and with
// the filter no AF_VSOCK (docs/sandbox-filter.md). The container's /proc
// stays mounted (read-only): episode code sees the container's processes
// there but, from its own PID namespace, cannot name them in a kill, and
// a process of another uid's /proc entry is closed to it.
//
// Run is start, wait and reap (run.go): start returns the running
// launcher and its pipes, so a long-lived process inside the episode's
// namespaces (the fork server, below) begins there and ends with the
// episode.
//
// # Fork server
//
// An interpreter start is most of a run. Episode.ForkServer (namespaces
// only) starts one Python interpreter through the launcher like a run,
// the template, which imports what runs need (ForkServerConfig.Preload),
// warms the interpreter once, and then only forks: servers (a Forker
// each), and for every run a child that makes the run's namespaces, its
// init and its program, which starts from the template's pristine state.
// The code is forkserver.py; the processes:
//
//	launcher (root, outside)            the template's, like a run's: it
//	 └ init (pid 1)                       kills everything below at the end
//	 └ template (pid 2)                 never runs agent code
//	    └ server (a Forker)             one run at a time
//	       └ child                      per run, made ahead: PID and IPC
//	          ├ init (pid 1 of the run)   namespaces, no capabilities, the
//	          └ program (pid 2)           episode's filter; the program
//	                                      takes the request and is the run
//
// The template is the episode's uid in the episode's namespaces with the
// runs' rlimits (but the CPU bound, which would end it, and
// serverProcesses more processes), no_new_privs, and a filter of its own
// (serverDenials: the episode's, but that it may unshare a PID and an IPC
// namespace together, with or without a network namespace). Between the uid switch and its exec its launcher
// puts it in a user namespace of its own that maps the uid to itself and
// nothing else (any process may make one; the maps are written through
// the server's /proc, the episode's being read-only) and keeps of the
// capabilities it has there CAP_SYS_ADMIN and CAP_NET_ADMIN alone,
// ambient so that they survive the exec: that user namespace owns only
// the PID and IPC namespaces of runs and the network namespaces of graded
// cases, so the capabilities let the server make those (and bring their
// loopback interfaces up) and nothing else (the mount and network
// namespaces stay the episode's, owned by its user namespace, where the
// server has no capability). It
// is not dumpable once forkserver.py runs (nor is any process it makes
// until a run's program takes its request: their /proc files are
// root's; the exec makes it dumpable again for the interpreter's start,
// when a run of the uid could read, not write, its /proc: nothing of a
// task is in it), and no process of a run can name it: runs are in PID
// namespaces below its own, and the kernel refuses a pidfd_send_signal
// through a /proc descriptor of a process outside the sender's
// namespace. A spawned run of the uid beside it (the fallback) is the
// owner of the server's user namespace, in its parent, so the kernel
// gives it every capability there: the filter's setns denial is what
// keeps it out of that namespace and the next run's IPC and PID
// namespaces (without it, it joined them), with the ptrace family's, the
// server's root-owned /proc files and the read-only /proc
// (testdata/agents/fork_server_kill.py tries every way, from a forked
// run, a spawned one and another uid's: TestForkServerOwnerReachesNothing).
//
// A server makes its first run's child as soon as it starts, and the
// next as soon as the run before took its request, so that it is ready
// however soon the next comes. The child unshares the run's PID and IPC
// namespaces (and a NetworkForker's a network namespace, whose loopback
// interface it brings up), drops every capability, installs the episode's filter over
// the server's (so nothing it forks can unshare anything), and forks the
// namespace's init (no handler for any signal, orphans reaped by the
// kernel, every descriptor closed; it dies with the child, and ends once
// pid 2 ended) and the program (pid 2), which does once what its set-up
// will do (so the pages it writes are its own before the request) and
// reads the next request itself: the run's standard input, output and
// error, and report and cancel pipes. It says the run started and hands
// the child the report and cancel pipes. The child waits for the init,
// reaping the program when it ends (the init's end waits until every pid
// of its namespace is free), or for the cancel pipe, when it kills the
// init; either way the kernel kills every process of the namespace as
// the init ends, and the child reports the program's status on the
// report pipe, as the launcher does. The program sets itself up as the
// launcher's program is (its descriptors, a session, the workspace, the
// run's rlimits, umask 077, dumpable as after an exec; no_new_privs and
// the filter it has), then as `python3 <flags> <script>` would start:
// sys.modules as the interpreter starts them plus the preloaded modules
// (all dropped when the script's directory holds a name one of them
// starts with, so the script imports its own), argv, sys.path, -B, the
// environment, new standard input (and output or error when they are not
// pipes, as the template's were) and a new __main__; it runs the script
// at the template's top level (one frame above it), prints an uncaught
// exception as the interpreter does, waits for its threads, runs the
// atexit functions, finalizes __main__ (files it left open are flushed),
// flushes the streams, and exits. A script the interpreter reads
// differently (NUL bytes, bytecode, unreadable) is exec'd with the
// interpreter itself. Nothing a run does reaches the next: each is a new
// process forked from a template no run ever touched.
//
// What differs from a spawned run (TestForkServerRunsAsSpawned checks
// the rest byte for byte): /proc/self/cmdline is the template's, two
// filters are stacked (Seccomp_filters 2), the hash seed and address
// layout are the template's (the same in every run), a run starts one
// frame deep, and RLIMIT_NPROC reads Processes plus runParents: the
// kernel counts a uid's processes per user namespace, and the server's
// are the uid's too (a run may start Processes, less the server's other
// processes alive beside it: the next run's three, another server and
// its first run's three; a spawned run finds those counted too).
//
// ForkServer.Forker (NetworkForker, for commands with OwnNetwork) asks
// the template for a server; Forker.Run runs a Command through it when
// the server serves it (the server's interpreter with -E, -s and at most
// -B on a script, its environment and limits, its OwnNetwork) and spawns
// it (Episode.Run) otherwise: another command, a template
// still starting (a run right after the reset) unless it should be ready
// sooner than a spawn would start the interpreter (then the run waits
// for it, at most that long: the sandbox keeps how long its templates
// took to start their interpreter, "up", and to be ready, startStats), a
// server that ended twice before a run started, or one that failed a
// step (then every run is, ForkServer.Err says why). A server or template that dies is
// replaced (the run it interrupted fails with ErrLaunch, after the
// template's namespace is ended, so nothing of it runs on); Close ends
// them all, and Episode.Close waits until none of their processes is
// left.
//
// # The launcher
//
// The launcher is not Go: a static ELF of about 600 bytes of machine code
// (testdata/launcher_amd64.s; amd64 only, elsewhere runs fail with
// ErrLaunch) that makes no decision of its own: it runs tables of system
// calls (setns, mounts, setresuid, prlimit64, seccomp, ...) that
// launcher.go lays out after the code with the data they point to, forks
// where its header says, and reports a failed call by its table and index
// on descriptor 3 (ErrLaunch then names the call and wraps its errno). It
// is kept in a sealed memfd per episode and set of limits and executed
// through /proc/self/fd; its exec costs tens of microseconds, where a Go
// launcher's runtime start-up cost about 1.5 ms. So the limits and the
// filter hold from the program's first instruction, and no thread of the
// server ever carries the filter.
//
// The syscall filter (filter.go, docs/sandbox-filter.md) denies what
// Docker's default profile denies and the standard library does not
// need, the kernel keyrings, every namespace call, and every socket family
// but AF_UNIX, AF_INET, AF_INET6 and routing netlink. Calls through
// another architecture's ABI (i386 int 0x80, x32) get ENOSYS, and so does
// clone3 (its flags cannot be inspected; glibc falls back to clone, whose
// namespace flags are denied).
//
// # Files as the uid
//
// Every operation on a workspace runs through AsUID: on a locked OS
// thread whose filesystem uid and gid (setfsuid(2), setfsgid(2)) are the
// episode's. The kernel then checks permissions as the uid (root's file
// capabilities are dropped from the thread while it is not fsuid 0) and
// files it creates belong to the uid. So the server never reads or writes
// through a link to a file the uid could not reach itself, and it needs no
// DAC_OVERRIDE or FOWNER. Every thread whose ids are switched (AsUID,
// KillAllOfUID) is a locked thread other than the main thread: the main
// thread's credentials are the process's for /proc and for signal
// permission checks.
//
// # Capabilities
//
// Running as root in a container, the sandbox needs exactly these four
// (besides a seccomp profile that lets it clone, unshare and setns into
// namespaces, and mount in its own):
//   - CAP_SETUID, CAP_SETGID: writing the user namespace's maps, the
//     program's setresuid/setresgid, setfsuid in AsUID, and the uid-only
//     kill's setresuid;
//   - CAP_CHOWN: giving a uid-only workspace to its uid;
//   - CAP_KILL: the uid-only kill of a program's session.
//
// Every other capability the set-up process and the launcher use is one
// they have in the episode's user namespace only, and the fork server's
// CAP_SYS_ADMIN one it has in its own.
package sandbox
