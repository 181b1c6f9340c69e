package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// userNSKnobs are the kernel settings that decide whether an unprivileged
// user may make a user namespace (the workspace containers' root is one:
// under rootless Docker it is the daemon's user on the host), the value
// each needs, and the command that sets it. A knob the kernel does not
// have does not apply.
var userNSKnobs = []struct {
	path, want, fix string
}{
	{"/proc/sys/user/max_user_namespaces", "> 0", "sysctl -w user.max_user_namespaces=15000"},
	{"/proc/sys/kernel/unprivileged_userns_clone", "1", "sysctl -w kernel.unprivileged_userns_clone=1"},
	{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "0", "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"},
}

// errNoUserNS is returned (wrapped) by checkUserNamespaces.
var errNoUserNS = errors.New("the kernel does not let unprivileged users make user namespaces, which the workbench's sandbox needs")

// checkUserNamespaces reads the knobs through readFile and, when they
// allow it, tries: a process started as an unprivileged user (nobody, as
// root; this user otherwise) in a new user namespace. The error says what
// to change, or to run the workbench's weaker uid-only sandbox.
func checkUserNamespaces(readFile func(string) ([]byte, error), try func() error) error {
	for _, k := range userNSKnobs {
		b, err := readFile(k.path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %v", errNoUserNS, k.path, err)
		}
		v := strings.TrimSpace(string(b))
		n, err := strconv.Atoi(v)
		ok := err == nil && (k.want == "> 0" && n > 0 || k.want == v)
		if !ok {
			return fmt.Errorf("%w: %s is %s, want %s (run: %s), or start the workbench with --sandbox uid-only, a weaker sandbox", errNoUserNS, k.path, v, k.want, k.fix)
		}
	}
	if err := try(); err != nil {
		return fmt.Errorf("%w: a process of an unprivileged user could not make one: %v (a security module may forbid it), or start the workbench with --sandbox uid-only, a weaker sandbox", errNoUserNS, err)
	}
	return nil
}

// tryUserNamespace runs util-linux's `unshare --user true` (as nobody
// when this process is root): an unprivileged process making a user
// namespace. Without unshare(1) only the knobs are checked.
func tryUserNamespace() error {
	path, err := exec.LookPath("unshare")
	if err != nil {
		return nil
	}
	cmd := exec.Command(path, "--user", "true")
	cmd.Dir = "/"
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
