// Package episode is the workbench environment, a port of seed 001
// (AgentWorkbenchEnvironment): one task per episode, a private workspace,
// eight tools (list_files, read_file, run_python, write_file, run_tests,
// check, submit, and the trainer's finish), and a reward on the final
// observation only:
//
//	0.7 x correctness + 0.1 read a file or ran code + 0.1 verified
//	+ 0.1 no invalid call, rounded to 4 places; 0 without a submitted answer.
//
// "Verified" means check said correct for exactly the submitted answer, or,
// for a code task, the tests passed and the workspace digest is unchanged
// since. The limits (Limits) are the seed's and configurable; refusals,
// their wording and their order follow the seed.
//
// # Sandbox
//
// Config.Sandbox (package sandbox, built once by cmd/workbench) runs every
// episode's code. As root, in namespaces (its default), each episode gets
// its own uid and namespaces (sandbox.Episode: user, mount and
// network namespaces and a sized tmpfs holding its workspace, /tmp and
// /dev/shm); every run of its code (the interpreter starts with the
// syscall filter, the uid and the per-run rlimits of Config.RunLimits
// already in place, a cleared environment and `python3 -E -s`) enters
// them in PID and IPC namespaces of its own (a graded case in a network
// namespace of its own too), and when it returns no process of it is
// alive. Every file operation on the workspace runs as
// the uid (sandbox.AsUID), so the root server never follows an agent's
// link to a file the uid could not reach, and the container needs only
// CAP_SETUID, CAP_SETGID, CAP_CHOWN and CAP_KILL. A consequence: a file
// or directory the agent made unreadable to itself (chmod 000) is
// unreadable to read_file, left out of list_files, and makes the
// workspace digest fail (no verification credit, and graded cases fail),
// where the seed, reading as root, would read it.
//
// In namespaces each episode also gets a fork server (sandbox.ForkServer),
// its template starting in the background: every run is a
// process forked from one interpreter started once, contained, limited
// and set up as a spawned one (`python3 -E -s script`), from the
// interpreter's pristine state (json preloaded, for test_solution.py).
// The agent's runs (run_python, the test file of run_tests) fork from
// one of its servers; a run that comes while the template starts waits
// for it when it will be up sooner than a spawn would start, and is
// spawned otherwise, as is every run once the server cannot serve.
// Config.NoForkServer spawns every run (the fallback, and the benchmarks'
// control). An environment of one call (OneCall: a stateless HTTP or
// JSON-RPC call's) starts its fork server at its first graded case: the
// one run of the agent's it may make is spawned, rather than raced by a
// template it would never use.
//
// # Episodes made ahead
//
// All of an episode but its task's files (its uid, namespaces and tmpfs,
// its fork server and the agent's runs' server) is made ahead: when an
// episode ends (submitted, out of steps or invalid calls, finished), the
// step's answer does not wait for its teardown; a goroutine of the
// environment tears it down (nothing of it left, its uid released) and
// then makes the next episode's workspace, whose template starts at once.
// The next reset takes it (waiting for it if it is still being made) and
// writes the task's files, and asks for a grading server for a code task.
// At most one episode is made ahead, and only once the ended one's uid is
// free; a reset that replaces a running episode makes the new one at once
// and tears the old one down in the background (or first, when no uid is
// free). Close waits for all of it and frees the one made ahead. An
// environment of one episode (OneEpisode: a stateless call's, an MCP
// session's) makes none ahead.
//
// The uid-only sandbox (weaker, only when asked for) runs the code as the
// uid in the server's namespaces, and the unsandboxed mode (not root) as
// the server's own user, as the seed does; Config.Metadata says which.
//
// # Grading
//
// Non-code answers go to Grader.ScoreAnswer. A code task is graded by
// running the task's function on each case alone, each case forked from
// the episode's grading server: a server of the fork server's template
// asked for before the sequence (at reset, and after each sequence for the
// next) and ended after it, so no graded case forks from a server that
// any earlier run of the agent's came from. Before each case no
// process of the episode is left, its /tmp and /dev/shm are empty
// (sandbox.Episode.ClearScratch; its System V and POSIX IPC objects went
// with the previous run's IPC namespace), the workspace directory's user
// xattrs, ACLs and times are reset, and a case that changes the workspace
// digest is void, as is every case after it. The probe gets the arguments on stdin (not argv, which
// other uids can read in /proc). Visible cases are compared here (their
// expected values are in test_solution.py anyway); the hidden cases'
// arguments come from Grader.HiddenInputs and their outputs go to
// Grader.Judge, so with a remote Grader the hidden expected values and the
// answer key never enter this process. A Grader error refuses the step
// (the agent sees a reason, the episode goes on); it never gives credit.
// A nil Config.Grader grades in-process from package tasks (LocalGrader).
// With any other Grader, Reset drops the built task's Key at once (on a
// copy) and nothing but LocalGrader's methods reads a Key (keyread_test.go
// checks the source), so the environment holds no answer key.
//
// # Task binding
//
// With Config.Binding (package bind) every reset, and the implicit reset
// of a step before any, plays the bound task; a reset naming another is
// refused with the binding's error before anything of the running
// episode is touched, as an unknown task is.
//
// # Deviations from the seed
//
//   - Output beyond 1 MiB per stream is read and counted, not kept; the
//     clip marker counts those bytes as characters.
//   - A process the agent leaves holding the output pipes is killed when
//     the script's own process exits, instead of making the run time out.
//   - A code task's cases: a case that changes the workspace voids every
//     later case even if a later one changes it back, and the void cases
//     are not run at all.
//   - Agent code runs with umask 077 and no_new_privs, and its stdin is
//     /dev/null; in namespaces it is pid 2 of its run's PID namespace,
//     its /tmp and /dev/shm are its episode's own, everything but its
//     workspace, /tmp and /dev/shm is read-only, and it has no network
//     but its own loopback.
//   - read_file refuses files over 64 MiB.
package episode
