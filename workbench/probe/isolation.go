package probe

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
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
var uidVars = []string{"WORKBENCH_UID_BASE", "WORKBENCH_UID_COUNT"}

// FindUIDBlock reads the uid block of the process listening at listen
// ("unix:PATH", "tcp:PORT"): WORKBENCH_UID_BASE and WORKBENCH_UID_COUNT of
// its environment, both required.
func FindUIDBlock(listen string) (base, count int, err error) {
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
	vals := map[string]int{}
	for _, kv := range bytes.Split(env, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if !ok || !slices.Contains(uidVars, k) {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return 0, 0, fmt.Errorf("%s of pid %d is not a positive number", k, p.Pid)
		}
		vals[k] = n
	}
	for _, k := range uidVars {
		if _, ok := vals[k]; !ok {
			return 0, 0, fmt.Errorf("pid %d has no %s in its environment", p.Pid, k)
		}
	}
	return vals[uidVars[0]], vals[uidVars[1]], nil
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
	type result struct{ outcome, err string }
	done := make(chan result, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine, so its
		// switched ids never serve anything else.
		runtime.LockOSThread()
		unix.Setfsgid(as)
		unix.Setfsuid(as)
		if got, _ := unix.SetfsuidRetUid(-1); got != as {
			done <- result{OutcomeError, fmt.Sprintf("could not become fsuid %d", as)}
			return
		}
		o, e := dial()
		done <- result{o, e}
	}()
	r := <-done
	return r.outcome, r.err
}

// DialTCP connects to addr within timeout and closes the connection at
// once; it returns the outcome (OutcomeConnected or what stopped it) and
// the error's text.
func DialTCP(ctx context.Context, addr string, timeout time.Duration) (string, string) {
	return dialAs(ctx, "tcp", addr, timeout, 0)
}
