package docker

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"unicode"
)

// EnvDockerHost is the environment variable that names the daemon.
const EnvDockerHost = "DOCKER_HOST"

// maxHostLen bounds a DOCKER_HOST value.
const maxHostLen = 4096

// Host kinds of error, returned wrapped in a *HostError by ResolveHost.
// Their text follows `DOCKER_HOST "<value>": ` (see HostError).
var (
	// ErrHostUnset: DOCKER_HOST is empty or unset; agentpen never falls back
	// to a default daemon.
	ErrHostUnset = errors.New("DOCKER_HOST is not set (agentpen uses no default daemon)")
	// ErrHostUnsafe: the value holds whitespace, a control character, a
	// wildcard, "..", or is not a clean absolute path.
	ErrHostUnsafe = errors.New("not a clean absolute socket path")
	// ErrHostNotUnix: the scheme is not unix (tcp, ssh, npipe, fd, ...), or
	// the URL carries a host, query or fragment.
	ErrHostNotUnix = errors.New("not a unix socket (tcp, ssh and other schemes are refused)")
	// ErrHostRootful: the value names the shared, rootful daemon socket.
	ErrHostRootful = errors.New("the shared rootful Docker socket is forbidden")
	// ErrHostNotRootless: the socket path does not look like a rootless
	// daemon's and the caller did not allow a custom path.
	ErrHostNotRootless = errors.New("not recognisably a rootless daemon's socket (/run/user/<uid>/docker.sock)")
	// ErrHostLinked: the socket has another hard link, so the same daemon
	// has two real paths and agentpen's daemon-wide locks (derived from
	// the real path) could be split between them; use the daemon's own
	// path.
	ErrHostLinked = errors.New("the socket has more than one hard link (agentpen keys its daemon-wide locks on the socket's real path: name the daemon's own socket)")
)

// rootfulSockets are the paths of the system daemon's socket.
var rootfulSockets = map[string]bool{
	"/var/run/docker.sock": true,
	"/run/docker.sock":     true,
	"/docker.sock":         true,
}

// rootlessSocket matches the socket a rootless daemon makes in its user's
// runtime directory.
var rootlessSocket = regexp.MustCompile(`^/run/user/[0-9]+/(?:docker|docker-rootless)(?:-[A-Za-z0-9_.-]+)?\.sock$`)

// HostError is the error ResolveHost returns: the offending value and the
// kind of problem (one of the ErrHost* values). It prints
// `DOCKER_HOST "<value>": <kind>`, or the kind alone for an unset value.
type HostError struct {
	Value string
	Err   error
}

func (e *HostError) Error() string {
	if e.Value == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("DOCKER_HOST %q: %v", e.Value, e.Err)
}

func (e *HostError) Unwrap() error { return e.Err }

// Host is a resolved rootless daemon endpoint: an explicit unix socket. The
// zero Host is not valid; get one from ResolveHost.
type Host struct {
	// URL is the canonical form, "unix://" + SocketPath.
	URL string
	// SocketPath is the absolute, clean path of the socket.
	SocketPath string
	// Custom is true when the path was accepted only because the caller
	// allowed a custom (not recognisably rootless) path.
	Custom bool
}

// String returns h.URL.
func (h Host) String() string { return h.URL }

// ResolveHost validates a DOCKER_HOST value (port of seed 004's
// resolve_rootless_docker_host, made stricter). It must be set; a bare
// absolute path or a unix:// URL with no host, query or fragment; never the
// rootful sockets /var/run/docker.sock, /run/docker.sock or /docker.sock; a
// clean absolute path without whitespace, control characters, wildcards,
// URL escapes ('%', '#') or ".."; and, unless allowCustom, shaped like a rootless daemon's socket
// (/run/user/<uid>/docker*.sock or a path with a /rootless/ component).
//
// A path that passes can still be a symlink to a rootful socket; Connect's
// check of the daemon's own security options is what settles rootlessness.
func ResolveHost(value string, allowCustom bool) (Host, error) {
	fail := func(err error) (Host, error) { return Host{}, &HostError{Value: value, Err: err} }
	if value == "" {
		return fail(ErrHostUnset)
	}
	if len(value) > maxHostLen {
		return Host{}, &HostError{Value: value[:64] + "...", Err: ErrHostUnsafe}
	}
	for _, r := range value {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == '*' || r == '?' || r == '[' || r == '#' || r == '%' || r == unicode.ReplacementChar {
			return fail(ErrHostUnsafe)
		}
	}
	p := value
	if !strings.HasPrefix(value, "/") {
		scheme, rest, ok := strings.Cut(value, ":")
		if !ok || !strings.EqualFold(scheme, "unix") {
			return fail(ErrHostNotUnix)
		}
		switch {
		case strings.HasPrefix(rest, "///"):
			p = rest[2:]
		case strings.HasPrefix(rest, "//"):
			return fail(ErrHostNotUnix) // unix://host/...: a host part
		default:
			p = rest
		}
	}
	if !strings.HasPrefix(p, "/") || p == "/" || path.Clean(p) != p {
		return fail(ErrHostUnsafe)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." || part == "." {
			return fail(ErrHostUnsafe)
		}
	}
	if rootfulSockets[p] {
		return fail(ErrHostRootful)
	}
	recognised := rootlessSocket.MatchString(p) || strings.Contains(p, "/rootless/")
	if !recognised && !allowCustom {
		return fail(ErrHostNotRootless)
	}
	return Host{URL: "unix://" + p, SocketPath: p, Custom: !recognised}, nil
}

// HostFromEnv resolves DOCKER_HOST as getenv reports it (os.Getenv in
// production; a map lookup in tests).
func HostFromEnv(getenv func(string) string, allowCustom bool) (Host, error) {
	return ResolveHost(getenv(EnvDockerHost), allowCustom)
}
