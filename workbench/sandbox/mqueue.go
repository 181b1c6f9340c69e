package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNoQueueView is returned (wrapped) by FindSharedPlaces when POSIX
// message queues exist but cannot be listed: episode code could then
// leave one for the next episode and no sweep would see it.
var ErrNoQueueView = errors.New("no view of the POSIX message queues")

// openQueueView opens the root of this IPC namespace's mqueue file system,
// which lists every POSIX message queue, whether or not one is mounted
// anywhere (mq_open needs no mount):
//
//   - a private mount made with fsopen/fsmount, attached nowhere, so the
//     host's mount table does not change (needs CAP_SYS_ADMIN: root on a
//     host);
//   - else an mqueue mount of the mount table (Docker mounts one at
//     /dev/mqueue in every container), if a queue this process makes
//     shows up in it, so it belongs to this IPC namespace.
//
// A kernel without POSIX message queues needs no view.
func (p *SharedPlaces) openQueueView(mounts []Mount) error {
	fd, err := privateQueueMount()
	switch {
	case errors.Is(err, unix.ENODEV):
		p.Queues = "none: this kernel has no POSIX message queues"
		return nil
	case err == nil:
		if err := checkQueueView(fd); err != nil && !errors.Is(err, errNoProbe) {
			unix.Close(fd)
			return fmt.Errorf("find shared places: private mqueue mount: %w", err)
		} else if err != nil {
			p.Skipped = append(p.Skipped, fmt.Sprintf("private mqueue mount: not checked: %v", err))
		}
		p.queueDir, p.Queues = fd, "a private mount of the mqueue file system"
		return nil
	}
	why := []error{fmt.Errorf("private mount: %w", err)}
	for _, m := range mounts {
		if m.FSType != "mqueue" {
			continue
		}
		fd, err := unix.Open(m.Point, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			err = checkQueueView(fd)
			if err == nil {
				p.queueDir, p.Queues = fd, "the mqueue mount at "+m.Point
				return nil
			}
			unix.Close(fd)
		}
		why = append(why, fmt.Errorf("%s: %w", m.Point, err))
	}
	return fmt.Errorf("find shared places: %w (%w); mount one (mount -t mqueue none /dev/mqueue) or run with CAP_SYS_ADMIN",
		ErrNoQueueView, errors.Join(why...))
}

// privateQueueMount makes a mount of this IPC namespace's mqueue file
// system that is attached to no mount point, and returns its fd.
func privateQueueMount() (int, error) {
	fsfd, err := unix.Fsopen("mqueue", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, err
	}
	defer unix.Close(fsfd)
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return -1, err
	}
	return unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
}

// errNoProbe: the probe queue could not be made, so a view was not
// checked.
var errNoProbe = errors.New("cannot make a probe queue")

// checkQueueView makes a queue with a random name and checks that the view
// at fd lists it, so the view is of this process's IPC namespace.
func checkQueueView(fd int) error {
	var b [12]byte
	rand.Read(b[:])
	name := "wb-probe-" + hex.EncodeToString(b[:])
	qfd, err := mqOpen(name, unix.O_RDONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("%w: %v", errNoProbe, err)
	}
	unix.Close(qfd)
	defer mqUnlink(name)
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("a queue of this process is not listed there: %w", err)
	}
	return nil
}

// mqAttr is struct mq_attr.
type mqAttr struct {
	flags, maxmsg, msgsize, curmsgs int64
	_                               [4]int64
}

// mqOpen is mq_open(3) of "/"+name, the smallest queue there is.
func mqOpen(name string, flags int, mode uint32) (int, error) {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return -1, err
	}
	attr := mqAttr{maxmsg: 1, msgsize: 1}
	r, _, errno := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(p)), uintptr(flags), uintptr(mode), uintptr(unsafe.Pointer(&attr)), 0, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(r), nil
}

// mqUnlink is mq_unlink(3) of "/"+name.
func mqUnlink(name string) error {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return err
	}
	if _, _, errno := unix.Syscall(unix.SYS_MQ_UNLINK, uintptr(unsafe.Pointer(p)), 0, 0); errno != 0 {
		return errno
	}
	return nil
}

// removeQueues removes every POSIX message queue uid owns, as the uid: the
// mqueue root is sticky and world-writable, so the kernel lets the uid
// remove its own queues and no other.
func (p *SharedPlaces) removeQueues(uid int) error {
	if p.queueDir < 0 {
		return nil
	}
	// An open of its own: its offset is not shared with another sweep.
	dfd, err := unix.Openat(p.queueDir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("list POSIX message queues: %w", err)
	}
	defer unix.Close(dfd)
	budget := findMaxEntries
	names, err := readDirNames(dfd, &budget)
	if err != nil {
		return fmt.Errorf("list POSIX message queues: %w", err)
	}
	var mine []string
	for _, n := range names {
		var st unix.Stat_t
		if unix.Fstatat(dfd, n, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && int(st.Uid) == uid {
			mine = append(mine, n)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	return AsUID(uid, func() error {
		var errs []error
		for _, n := range mine {
			if err := unix.Unlinkat(dfd, n, 0); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("remove POSIX message queue /%s of uid %d: %w", n, uid, err))
			}
		}
		return errors.Join(errs...)
	})
}
