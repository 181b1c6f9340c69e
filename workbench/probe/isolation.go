package probe

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentpen/agentpen/workbench/sandbox"
)

// Interfaces lists the network interfaces under dir (/sys/class/net),
// sorted. A container with no network has "lo" only.
func Interfaces(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("interfaces: %w", err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	slices.Sort(out)
	return out, nil
}

// uidVars are the only variables a uid_block probe reads from a process's
// environment; every other value (the API key among them) is skipped.
var uidVars = []string{"WORKBENCH_UID_BASE", "WORKBENCH_UID_COUNT", "WORKBENCH_UID_LOCK_DIR"}

// FindUIDBlock reads the uid block of the process listening at listen
// ("unix:PATH", "tcp:PORT") and checks that the process runs episodes in
// it: the block given in its environment (WORKBENCH_UID_BASE and
// WORKBENCH_UID_COUNT, both required), the range the server recorded in
// its uid lock directory at start (sandbox.RecordRange; a server that
// ignored its environment records another or none), which must be the
// same, and every uid handed out so far (a lock file each), which must lie
// in it.
//
// With selfNS (wire.Request.SelfNS: a runtime without a privileged exec,
// which cannot read a non-dumpable server's /proc) the environment and
// the lock directory are the probe's own: the exec runs in the server's
// container, with its configured environment and its mount namespace.
func FindUIDBlock(listen string, selfNS bool) (base, count int, err error) {
	if selfNS {
		return findUIDBlockIn("/", "self", []byte(strings.Join(os.Environ(), "\x00")))
	}
	return findUIDBlock("/proc", listen, os.Getpid())
}

func findUIDBlock(proc, listen string, self int) (base, count int, err error) {
	p, err := findProcess(proc, listen, self)
	if err != nil {
		return 0, 0, err
	}
	env, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(p.Pid), "environ"))
	if err != nil {
		return 0, 0, fmt.Errorf("environment of pid %d: %w", p.Pid, err)
	}
	// The lock directory as the server's mount namespace sees it.
	return findUIDBlockIn(filepath.Join(proc, strconv.Itoa(p.Pid), "root"), "pid "+strconv.Itoa(p.Pid), env)
}

// findUIDBlockIn checks the block env gives against what the server
// recorded under root (its file system), who naming it in errors.
func findUIDBlockIn(root, who string, env []byte) (base, count int, err error) {
	vals := map[string]string{}
	for _, kv := range bytes.Split(env, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if ok && slices.Contains(uidVars, k) {
			vals[k] = v
		}
	}
	for _, k := range uidVars[:2] {
		if vals[k] == "" {
			return 0, 0, fmt.Errorf("%s has no %s in its environment", who, k)
		}
	}
	given, err := sandbox.RangeFromEnv(func(k string) string { return vals[k] })
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", who, err)
	}
	dir := vals["WORKBENCH_UID_LOCK_DIR"]
	if dir == "" {
		dir = sandbox.DefaultLockDir
	}
	dir = filepath.Join(root, dir)
	b, err := os.ReadFile(filepath.Join(dir, sandbox.RangeFileName))
	if err != nil {
		return 0, 0, fmt.Errorf("%s recorded no uid range: %w", who, err)
	}
	used, err := sandbox.ParseRange(string(b))
	if err != nil {
		return 0, 0, fmt.Errorf("%s recorded: %w", who, err)
	}
	if used != given {
		return 0, 0, fmt.Errorf("%s runs episodes under uids %v, its environment gives it %v", who, used, given)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("uid locks of %s: %w", who, err)
	}
	for _, e := range ents {
		if uid, err := strconv.Atoi(e.Name()); err == nil && !used.Contains(uid) {
			return 0, 0, fmt.Errorf("%s handed out uid %d, outside its block %v", who, uid, used)
		}
	}
	return given.Base, given.Count, nil
}

// dialAs connects to addr ("tcp" host:port, or a "unix" socket path)
// within timeout and closes the connection at once; with as > 0 the
// connect runs on a thread of its own whose file-system uid and gid are
// as, so permission checks on a socket's path are those of that uid (the
// kernel drops the thread's file capabilities with its fsuid), and the
// thread is thrown away afterwards. It returns the outcome and the
// error's text.
func dialAs(ctx context.Context, network, addr string, timeout time.Duration, as int) (string, string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dial := func() (string, string) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return Classify(ctx, err), err.Error()
		}
		c.Close()
		return OutcomeConnected, ""
	}
	if as <= 0 {
		return dial()
	}
	var outcome, msg string
	if err := asUID(as, func() { outcome, msg = dial() }); err != nil {
		return OutcomeError, err.Error()
	}
	return outcome, msg
}

// Route says whether the kernel has a route to addr, by connecting a UDP
// socket to it: a UDP connect only picks the route and the source
// address, and sends nothing. OutcomeFound: a route, leaving from the
// local address source; otherwise what stopped it (OutcomeUnreachable:
// no route).
func Route(ctx context.Context, addr string) (outcome, msg, source string) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return Classify(ctx, err), err.Error(), ""
	}
	defer c.Close()
	local, _ := netip.ParseAddrPort(c.LocalAddr().String())
	return OutcomeFound, "", local.Addr().String()
}

// asUID runs fn with the filesystem ids of uid as (what a connect or an
// open is checked against), on a thread of its own, never the main
// thread, that ends with fn: its switched ids never serve anything else.
func asUID(as int, fn func()) error {
	return sandbox.OnThrowawayThread(func() error {
		unix.Setfsgid(as)
		unix.Setfsuid(as)
		if got, _ := unix.SetfsuidRetUid(-1); got != as {
			return fmt.Errorf("could not become fsuid %d", as)
		}
		fn()
		return nil
	})
}

// DialTCP connects to addr within timeout and closes the connection at
// once; it returns the outcome (OutcomeConnected or what stopped it) and
// the error's text.
func DialTCP(ctx context.Context, addr string, timeout time.Duration) (string, string) {
	return dialAs(ctx, "tcp", addr, timeout, 0)
}
