// Package wire is the probe batch's JSON, both sides of it: what the
// attestation asks a container for (Batch, Request) and what `workbench
// probe --batch` answers (BatchResult, Outcome and what a probe found),
// with the kinds and outcomes they name. It imports the standard
// library's encoding only, so the pure attest package and the workbench's
// probe share one definition; running probes and validating a batch are
// package probe's.
package wire

import (
	"encoding/json"
	"time"
)

// Probe kinds of a Batch.
const (
	KindHTTP    = "http"
	KindTCP     = "tcp"
	KindSocket  = "socket"
	KindProcess = "process"
	// KindUnix connects to a unix socket (Addr is its path).
	KindUnix = "unix"
	// KindInterfaces lists the network interfaces of the container
	// (/sys/class/net): a container without a network has "lo" only.
	KindInterfaces = "interfaces"
	// KindUIDBlock reads the uid block (WORKBENCH_UID_BASE and
	// WORKBENCH_UID_COUNT, nothing else) from the environment of the
	// process listening at Listen.
	KindUIDBlock = "uid_block"
	// KindFile looks at the file at Path as root (never reading it) and
	// tries to open it for reading as the uid As (probe.ProbeFile): what a
	// sandbox uid can read.
	KindFile = "file"
	// KindEpisode runs code as an episode of the workbench serving at
	// Listen and reports its isolation (probe.EpisodeIsolation).
	KindEpisode = "episode"
	// KindGit finds the git repositories under Path and audits each, as
	// the uid As, against its base (Bases, or its HEAD): what it holds
	// past the base (probe.AuditGit).
	KindGit = "git"
	// KindRoute asks the kernel for a route to Addr (host:port) by
	// connecting a UDP socket, which sends nothing: OutcomeFound when
	// there is one (Outcome.Source the local address it leaves from),
	// OutcomeUnreachable when there is none. It shows the way to an
	// address the attestation must never send to (a cloud's metadata
	// service) without using it.
	KindRoute = "route"
)

// Limits of a Batch.
const (
	// MaxBatch is the most probes one batch may hold.
	MaxBatch = 256
	// MaxTimeout bounds any one probe of a batch.
	MaxTimeout = 30 * time.Second
)

// Batch is a set of probes run at once in one process, so a container is
// probed with one docker exec and its probes wait out their timeouts
// together. It is the JSON `workbench probe --batch` takes.
type Batch struct {
	Probes []Request `json:"probes"`
}

// Request is one probe of a Batch.
type Request struct {
	// ID names the probe in the results; unique in the batch, required.
	ID string `json:"id"`
	// Kind is one of the Kind constants.
	Kind string `json:"kind"`
	// URL, Method and Expect are an HTTP probe's (see Config).
	URL    string `json:"url,omitempty"`
	Method string `json:"method,omitempty"`
	Expect []int  `json:"expect,omitempty"`
	// HeaderEnv maps a request header to the environment variable whose
	// value it carries, so a key never appears in the command line.
	HeaderEnv map[string]string `json:"header_env,omitempty"`
	// Body asks for the reply body in the result, when it is JSON (at most
	// 64 KiB).
	Body bool `json:"body,omitempty"`
	// Addr is a TCP probe's host:port, a unix probe's socket path.
	Addr string `json:"addr,omitempty"`
	// Path is a file probe's file, a git probe's root (absolute, clean).
	Path string `json:"path,omitempty"`
	// Bases are a git probe's declared base commits (40 hex), by
	// repository (a work tree's path, or a git directory's when it has
	// none); a repository found and not named here is audited against its
	// HEAD, one named and not found is an error.
	Bases map[string]string `json:"bases,omitempty"`
	// GitKnown are a git probe's known state keys, by repository: the
	// StateKey of an earlier clean audit of the same image's repository
	// at the same base, as the same uid. A repository whose key is the
	// same is not audited again (GitAudit.Cached).
	GitKnown map[string]string `json:"git_known,omitempty"`
	// Unix is the socket an HTTP probe's request goes to (see Config.Unix).
	Unix string `json:"unix,omitempty"`
	// As runs a unix or TCP probe's connect, a file probe's open or a git
	// probe's audit as
	// this uid (and gid), not root, to show what a sandbox uid can reach;
	// zero keeps root.
	As int `json:"as,omitempty"`
	// AsMain runs them as the uid of the container's main process (PID 1,
	// or its first child when PID 1 is an init) instead: the image's
	// user, whom a launcher's own command runs as. Not with As.
	AsMain bool `json:"as_main,omitempty"`
	// Listen is a process, uid_block or episode probe's target:
	// "tcp:PORT", "unix:PATH", or (a process probe) empty for the
	// container's main process (PID 1, or its first child when PID 1 is
	// an init).
	Listen string `json:"listen,omitempty"`
	// ArgvSuffix: a process probe also reports the digest of the last
	// ArgvSuffix arguments of the process (Process.SuffixDigest): a
	// cluster's pod spec names them, after the image's entrypoint, which
	// the API does not report.
	ArgvSuffix int `json:"argv_suffix,omitempty"`
	// SelfNS: for a runtime without a privileged exec (a cluster's
	// pods/exec), which cannot read the serving process's /proc: an
	// episode probe compares the episode's namespaces with the probe's
	// own, and a uid_block probe reads the block from its own environment
	// and file system. The exec runs in the server's container, in its
	// namespaces and with its configured environment.
	SelfNS bool `json:"self_ns,omitempty"`
	// TimeoutMS bounds the probe; zero means probe.DefaultTimeout.
	TimeoutMS int `json:"timeout_ms,omitempty"`
}

// BatchResult is what probe.RunBatch prints: the id of the container it ran in
// and one Outcome per request, in the requests' order.
type BatchResult struct {
	// ContainerID is the Docker container this process runs in, read from
	// /proc/self/mountinfo (the daemon bind-mounts
	// <root>/containers/<id>/hostname at /etc/hostname); empty when it is
	// not found. It ties the results to a container.
	ContainerID string    `json:"container_id,omitempty"`
	Results     []Outcome `json:"results"`
	// Binary is the probe binary's own identity (the workbench of the
	// container's image that ran the batch); absent from a probe that
	// does not report one.
	Binary *Binary `json:"binary,omitempty"`
}

// Binary is what a binary says of itself: its build's version and
// commit, and the digest of its executable file.
type Binary struct {
	// Version is the build's version (a module version, the stamp make
	// build sets, or "devel").
	Version string `json:"version"`
	// Commit is the build's VCS revision ("unknown" without one).
	Commit string `json:"commit"`
	// Modified says the tree had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// Digest is "sha256:" and the hex SHA-256 of the executable
	// (/proc/self/exe); empty when it could not be read.
	Digest string `json:"digest,omitempty"`
	// Error says why the executable could not be read.
	Error string `json:"error,omitempty"`
}

// Outcome is the result of one probe of a batch.
type Outcome struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Outcome string `json:"outcome"`
	// Status is an HTTP probe's reply status (0 without a reply).
	Status int `json:"status,omitempty"`
	// Error says what went wrong, for any outcome but success.
	Error     string  `json:"error,omitempty"`
	LatencyMS float64 `json:"latency_ms"`
	// Body is the reply body, when asked for and JSON.
	Body json.RawMessage `json:"body,omitempty"`
	// Sockets are what a socket probe found (probe.FindSockets).
	Sockets []Socket `json:"sockets,omitempty"`
	// Process is what a process probe found.
	Process *Process `json:"process,omitempty"`
	// Interfaces are what an interfaces probe found.
	Interfaces []string `json:"interfaces,omitempty"`
	// UIDBase and UIDCount are what a uid_block probe found.
	UIDBase  int `json:"uid_base,omitempty"`
	UIDCount int `json:"uid_count,omitempty"`
	// File is what a file probe found as root (absent when nothing).
	File *File `json:"file,omitempty"`
	// Isolation is what an episode probe found.
	Isolation *Isolation `json:"isolation,omitempty"`
	// Git is what a git probe found: one audit per repository.
	Git []GitAudit `json:"git,omitempty"`
	// Source is the local address the kernel chose for a route probe's
	// socket: routes that leave the same way choose the same one.
	Source string `json:"source,omitempty"`
}

// Outcomes of a probe. A connection or request either got through
// (OutcomeConnected for TCP, OutcomeReply for HTTP) or was stopped in one
// of the ways below, which the attestation tells apart: a refusal is an
// answer from something, a timeout is silence.
const (
	// OutcomeConnected: the TCP connection was established.
	OutcomeConnected = "connected"
	// OutcomeReply: an HTTP reply came back (any status).
	OutcomeReply = "reply"
	// OutcomeRefused: the peer answered with a reset (ECONNREFUSED).
	OutcomeRefused = "refused"
	// OutcomeTimeout: nothing answered before the probe's timeout.
	OutcomeTimeout = "timeout"
	// OutcomeUnreachable: the kernel had no route (ENETUNREACH,
	// EHOSTUNREACH, EADDRNOTAVAIL).
	OutcomeUnreachable = "unreachable"
	// OutcomeDNS: the name did not resolve.
	OutcomeDNS = "dns"
	// OutcomeDenied: the kernel refused the caller (EACCES, EPERM), as on
	// a unix socket in a directory the uid cannot search.
	OutcomeDenied = "denied"
	// OutcomeError: anything else (the error says what).
	OutcomeError = "error"
	// OutcomeVisible and OutcomeNone: a socket probe found a Docker socket,
	// or none.
	OutcomeVisible = "visible"
	OutcomeNone    = "none"
	// OutcomeFound and OutcomeNotFound: a process probe found the process
	// serving the socket or port, or none.
	OutcomeFound    = "found"
	OutcomeNotFound = "not_found"
	// OutcomeReadable: a file probe's uid could open the file for reading.
	OutcomeReadable = "readable"
	// OutcomeClean and OutcomeLeak: a git probe audited every repository
	// it found (none, for OutcomeClean, is clean too) and none, or one,
	// holds something past its base. A repository it could not audit is
	// OutcomeError.
	OutcomeClean = "clean"
	OutcomeLeak  = "leak"
)

// Socket is one place a socket probe looked at and found something.
type Socket struct {
	// Path is the path inside the container.
	Path string `json:"path"`
	// How says how it was found: "known_path", "glob", "env" (DOCKER_HOST)
	// or "mount" (a mount point, or a docker.sock inside one).
	How string `json:"how"`
	// IsSocket is true when the path is a unix socket.
	IsSocket bool `json:"is_socket"`
	// Connectable is true when a connect to it succeeded (nothing is sent).
	Connectable bool `json:"connectable"`
}

// Process is the custody evidence of the process serving a socket or
// port, read from /proc inside the container.
type Process struct {
	// Pid is the process's pid in the container (the lowest, when several
	// hold the listening socket).
	Pid int `json:"pid"`
	// Pids are every process holding the listening socket.
	Pids []int `json:"pids,omitempty"`
	// ArgvDigest is "sha256:" and the hex SHA-256 of its argv joined by
	// NUL; Argc is the number of arguments. The arguments themselves are
	// not returned.
	ArgvDigest string `json:"argv_digest"`
	Argc       int    `json:"argc"`
	// SuffixDigest is ArgvDigest of its last Request.ArgvSuffix
	// arguments, when asked ("" when it has fewer).
	SuffixDigest string `json:"suffix_digest,omitempty"`
	// Exe and Cwd are the targets of /proc/PID/exe and /proc/PID/cwd.
	Exe string `json:"exe"`
	Cwd string `json:"cwd"`
	// UID is its real uid.
	UID int `json:"uid"`
	// CapEff and CapBnd are its effective and bounding capability sets
	// (hex, as /proc/PID/status prints them); NoNewPrivs and Seccomp its
	// flags from the same file.
	CapEff     string `json:"cap_eff"`
	CapBnd     string `json:"cap_bnd"`
	NoNewPrivs bool   `json:"no_new_privs"`
	Seccomp    int    `json:"seccomp"`
	// Serves is what it was found by: "tcp:PORT", "unix:PATH", or "main".
	Serves string `json:"serves"`
}

// File is what a file probe found of its path as root: whether it is a
// regular file, its permission bits (octal, "0400") and its owner. It
// never holds the file's content.
type File struct {
	// Regular is true when it is a regular file (lstat: a link is not).
	Regular bool `json:"regular"`
	// Mode is its permission bits, in octal.
	Mode string `json:"mode"`
	// UID is its owner.
	UID int `json:"uid"`
}

// Isolation is what an episode probe found: the sandbox mode the episode
// server reports (its GET /metadata), the PID and network namespaces of
// the server and of code run as an episode of it, the network interfaces
// that code sees, and what became of its attempt to open a vsock socket.
type Isolation struct {
	// Sandbox is the sandbox mode the workbench reports (namespaces or
	// uid-only).
	Sandbox string `json:"sandbox"`
	// ServerPidNS is the episode server's PID namespace (its
	// /proc/PID/ns/pid link).
	ServerPidNS string `json:"server_pid_ns"`
	// ServerNetNS is the episode server's network namespace.
	ServerNetNS string `json:"server_net_ns"`
	// EpisodePidNS is the PID namespace of code run as an episode.
	EpisodePidNS string `json:"episode_pid_ns"`
	// EpisodeNetNS is the network namespace of code run as an episode.
	EpisodeNetNS string `json:"episode_net_ns"`
	// Interfaces are the network interfaces that code sees.
	Interfaces []string `json:"interfaces"`
	// VSock is what that code's attempt at a vsock socket got.
	VSock string `json:"vsock"`
	// EpisodeUID is the uid that code ran as; 0 when not reported (a
	// workbench before it: an episode never runs as root).
	EpisodeUID int `json:"episode_uid,omitempty"`
	// ServerFrom says where the server's namespaces were read: "process"
	// (the serving process's /proc) or "exec" (the probe's own, in the
	// server's container: Request.SelfNS).
	ServerFrom string `json:"server_from,omitempty"`
}

// GitAudit is one repository's audit (package gitaudit): the base it was
// audited against, what was checked, and what it holds past the base.
type GitAudit struct {
	// Path names the repository (its work tree, or its git directory).
	Path string `json:"path"`
	// Base is the commit audited against.
	Base string `json:"base,omitempty"`
	// BaseFrom says where Base came from: "declared" or "HEAD".
	BaseFrom string `json:"base_from,omitempty"`
	// Ancestors counts the base and its ancestors.
	Ancestors int `json:"ancestors"`
	// Reachable counts the objects the base reaches.
	Reachable int `json:"reachable"`
	// Objects counts the repository's objects.
	Objects int `json:"objects"`
	// Refs counts the references checked.
	Refs int `json:"refs"`
	// ReflogEntries counts the reflog entries checked.
	ReflogEntries int `json:"reflog_entries"`
	// Shallow: the repository holds no history below its shallow commits.
	Shallow bool `json:"shallow,omitempty"`
	// Leaks are the first leaks (at most 50).
	Leaks []GitLeak `json:"leaks,omitempty"`
	// LeakCount counts every leak, beyond the first 50 too.
	LeakCount int `json:"leak_count"`
	// Error says why the repository could not be audited.
	Error string `json:"error,omitempty"`
	// StateKey is the digest of the repository's files as the
	// filesystem describes them (gitaudit.StateKey), with the base, the
	// uid and the patch files.
	StateKey string `json:"state_key,omitempty"`
	// Cached says StateKey was the known key, and the repository was not
	// audited again (its counts are then zero).
	Cached bool `json:"cached,omitempty"`
}

// GitLeak is one thing a repository holds past its base.
type GitLeak struct {
	// Kind is ref, reflog, object or file.
	Kind string `json:"kind"`
	// Class says which: a branch, a stash, a commit, a pack...
	Class string `json:"class"`
	// Name is the ref, reflog entry, object or file.
	Name string `json:"name"`
	// Object is the object it names.
	Object string `json:"object,omitempty"`
	// Why says why it is past the base.
	Why string `json:"why"`
}
