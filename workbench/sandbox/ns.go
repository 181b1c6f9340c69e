package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// namespaces are one episode's: its user, mount and network namespaces,
// held by descriptors (no process keeps them), and its tmpfs's three
// directories, reached through the mount namespace: the workspace, /tmp
// and /dev/shm. Everything of the episode goes when they are closed.
type namespaces struct {
	user, mnt, net *os.File
	ws, tmp, shm   *os.File // O_PATH
}

// path is a directory of the episode as this process reaches it.
func (n *namespaces) path(f *os.File) string {
	return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) + "/."
}

func (n *namespaces) close() error {
	var errs []error
	for _, f := range []*os.File{n.user, n.mnt, n.net, n.ws, n.tmp, n.shm} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

// setupCaps are what the set-up process keeps across its exec, in the
// episode's user namespace only: mounts, the loopback interface, and
// creating the tmpfs's directories as the uid.
var setupCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETUID, unix.CAP_SETGID}

// setupNamespaces makes an episode's namespaces: a set-up process is
// cloned into a new user namespace (mapping uid to itself, nothing else:
// root is not mapped), mount namespace and network namespace, and runs
// setupTable; once it reports ready, the namespaces and directories are
// opened through its /proc entry, and it is let go.
func setupNamespaces(cfg Config, uid int) (_ *namespaces, err error) {
	im := &image{mode: modeExec}
	setupTable(im, cfg, uid)
	l, err := newLauncher(im)
	if err != nil {
		return nil, err
	}
	defer l.close()
	repR, repW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer repR.Close()
	holdR, holdW, err := os.Pipe()
	if err != nil {
		repW.Close()
		return nil, err
	}
	ids := []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	cmd := &exec.Cmd{
		Path:       l.path(),
		Args:       []string{launcherArg0},
		Stdin:      holdR,
		ExtraFiles: []*os.File{repW}, // launcherReportFD
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:                 unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWNET,
			UidMappings:                ids,
			GidMappings:                ids,
			GidMappingsEnableSetgroups: true, // the program's setgroups([])
			AmbientCaps:                setupCaps,
		},
	}
	err = cmd.Start()
	repW.Close()
	holdR.Close()
	if err != nil {
		holdW.Close()
		return nil, fmt.Errorf("%w: start the namespaces' set-up: %w", ErrNoUserNamespaces, err)
	}
	ns := &namespaces{}
	defer func() {
		holdW.Close() // the set-up exits
		werr := cmd.Wait()
		if err == nil && werr != nil {
			err = fmt.Errorf("the namespaces' set-up: %w", werr)
		}
		if err != nil {
			ns.close()
		}
	}()
	var rec [8]byte
	if _, err := io.ReadFull(repR, rec[:]); err != nil {
		return nil, fmt.Errorf("%w: the namespaces' set-up ended without a word: %w", ErrNoUserNamespaces, err)
	}
	reports, err := parseReports(rec[:])
	if err != nil {
		return nil, err
	}
	if r := reports[0]; r.tag != 'R' {
		return nil, fmt.Errorf("%w: the namespaces' set-up: %w", ErrNoUserNamespaces, im.failure(r, ""))
	}
	proc := "/proc/" + strconv.Itoa(cmd.Process.Pid)
	for _, o := range []struct {
		f     **os.File
		path  string
		flags int
	}{
		{&ns.user, proc + "/ns/user", unix.O_RDONLY},
		{&ns.mnt, proc + "/ns/mnt", unix.O_RDONLY},
		{&ns.net, proc + "/ns/net", unix.O_RDONLY},
		{&ns.ws, proc + "/root" + cfg.WorkspaceDir, unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW},
		{&ns.tmp, proc + "/root/tmp", unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW},
		{&ns.shm, proc + "/root/dev/shm", unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW},
	} {
		fd, err := unix.Open(o.path, o.flags|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open the episode's %s: %w", filepath.Base(o.path), err)
		}
		*o.f = os.NewFile(uintptr(fd), o.path)
	}
	// The directories must be the episode's tmpfs, not what was there.
	for _, f := range []*os.File{ns.ws, ns.tmp, ns.shm} {
		var st unix.Statfs_t
		if err := unix.Fstatfs(int(f.Fd()), &st); err != nil || st.Type != unix.TMPFS_MAGIC {
			return nil, fmt.Errorf("the episode's %s is not its tmpfs (%v)", f.Name(), err)
		}
	}
	return ns, nil
}

// setupTable is the set-up process's work, in its new namespaces: make
// every mount it inherited read-only and private; mount the episode's
// tmpfs on the workspace directory, and in it, as the uid (root is not
// mapped, so it could own nothing there), its workspace, /tmp and
// /dev/shm, which are bound over those places, the workspace over the
// tmpfs's own root (so nothing but these three is reachable, and the
// workspace, a mount point, cannot be renamed away); bring the loopback
// interface up; report ready; and wait until the server closes its
// standard input.
func setupTable(im *image, cfg Config, uid int) {
	u := uint64(uid)
	atFDCWD := int64(unix.AT_FDCWD)
	ws := cfg.WorkspaceDir
	attr := im.words(unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID, 0, unix.MS_PRIVATE, 0)
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=1777", cfg.EpisodeBytes, cfg.EpisodeInodes)
	ifreq := loopbackUp()
	ignore := func(c call) call { c.ignore = true; return c }
	tmpfs := im.str("tmpfs")
	im.add(tableProgram,
		sys(unix.SYS_MOUNT_SETATTR, "make the mounts read-only and private", uint64(atFDCWD), im.str("/"), unix.AT_RECURSIVE, attr, 32),
		sys(unix.SYS_MOUNT, "mount the episode's tmpfs on "+ws+" ("+opts+")", tmpfs, im.str(ws), tmpfs, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, im.str(opts)),
		ignore(sys(unix.SYS_SETFSGID, "setfsgid", u)),
		ignore(sys(unix.SYS_SETFSUID, "setfsuid", u)),
	)
	for _, d := range []string{"ws", "tmp", "shm"} {
		im.add(tableProgram, sys(unix.SYS_MKDIR, "mkdir "+d+" in the episode's tmpfs", im.str(ws+"/"+d), 0o700))
	}
	for _, b := range [][2]string{{ws + "/tmp", "/tmp"}, {ws + "/shm", "/dev/shm"}, {ws + "/ws", ws}} {
		im.add(tableProgram, sys(unix.SYS_MOUNT, "bind "+b[0]+" on "+b[1], im.str(b[0]), im.str(b[1]), 0, unix.MS_BIND, 0))
	}
	im.add(tableProgram,
		// The lowest free descriptor: the process has 0..3 only.
		sys(unix.SYS_SOCKET, "socket for the loopback interface", unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0),
		sys(unix.SYS_IOCTL, "bring the loopback interface up", 4, unix.SIOCSIFFLAGS, im.put(ifreq)),
		sys(unix.SYS_CLOSE, "close the socket", 4),
		// setfsuid made it undumpable; the server opens its /proc entry.
		sys(unix.SYS_PRCTL, "dumpable", unix.PR_SET_DUMPABLE, 1),
		sys(unix.SYS_WRITE, "report ready", launcherReportFD, im.put([]byte{'R', 0, 0, 0, 0, 0, 0, 0}), 8),
		sys(unix.SYS_READ, "wait for the server", 0, scratchAddr, 1),
		sys(unix.SYS_EXIT_GROUP, "exit", 0),
	)
}

// loopbackUp is the struct ifreq that SIOCSIFFLAGS takes to bring the
// loopback interface up.
func loopbackUp() []byte {
	ifreq := make([]byte, 40)
	copy(ifreq, "lo")
	ifreq[16] = unix.IFF_UP
	return ifreq
}

// namespacedTables are a namespaced run's launcher's own tables (the
// program's is programTable): enter the episode's namespaces and make new
// PID and IPC namespaces for the run (and, with ownNet, a network
// namespace whose loopback interface it brings up); the init (pid 1 of
// the PID namespace) dies with the launcher, ignores SIGCHLD (the kernel
// reaps the orphans it inherits), drops its capabilities and closes every
// descriptor; the launcher keeps only its report and cancel pipes.
func namespacedTables(im *image, ownNet bool) {
	ignore := func(c call) call { c.ignore = true; return c }
	im.add(tableBefore,
		sys(unix.SYS_SETNS, "enter the episode's user namespace", launcherUserNSFD, unix.CLONE_NEWUSER),
		sys(unix.SYS_SETNS, "enter the episode's mount namespace", launcherMntNSFD, unix.CLONE_NEWNS),
		sys(unix.SYS_SETNS, "enter the episode's network namespace", launcherNetNSFD, unix.CLONE_NEWNET))
	if !ownNet {
		im.add(tableBefore, sys(unix.SYS_UNSHARE, "make the run's PID and IPC namespaces", unix.CLONE_NEWPID|unix.CLONE_NEWIPC))
	} else {
		// A run's launcher has 0..launcherNetNSFD: the socket is the next.
		const sockFD = launcherNetNSFD + 1
		im.add(tableBefore,
			sys(unix.SYS_UNSHARE, "make the run's PID, IPC and network namespaces", unix.CLONE_NEWPID|unix.CLONE_NEWIPC|unix.CLONE_NEWNET),
			sys(unix.SYS_SOCKET, "socket for the run's loopback interface", unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0),
			sys(unix.SYS_IOCTL, "bring the run's loopback interface up", sockFD, unix.SIOCSIFFLAGS, im.put(loopbackUp())),
			sys(unix.SYS_CLOSE, "close the socket", sockFD))
	}
	const sigIgn = 1
	im.add(tableInit,
		sys(unix.SYS_PRCTL, "parent-death signal", unix.PR_SET_PDEATHSIG, uint64(unix.SIGKILL)),
		sys(unix.SYS_RT_SIGACTION, "ignore SIGCHLD", uint64(unix.SIGCHLD), im.words(sigIgn, 0, 0, 0), 0, 8),
		sys(unix.SYS_CAPSET, "drop capabilities", im.words(unix.LINUX_CAPABILITY_VERSION_3), im.put(make([]byte, 24))),
		ignore(sys(unix.SYS_CLOSE_RANGE, "close every descriptor", 0, 0xffffffff, 0)),
	)
	im.add(tableAfter,
		ignore(sys(unix.SYS_CLOSE_RANGE, "close standard input and output", 0, 2, 0)),
		ignore(sys(unix.SYS_CLOSE_RANGE, "close the namespaces", launcherUserNSFD, 0xffffffff, 0)),
	)
}
