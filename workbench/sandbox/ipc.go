package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ipcKinds are the System V IPC object kinds: the /proc/sysvipc file, its
// id column, and the system call that removes one.
var ipcKinds = []struct {
	file, idCol string
	rmid        func(id int) error
}{
	{"shm", "shmid", func(id int) error { return ipcCtl(unix.SYS_SHMCTL, id, 0, unix.IPC_RMID) }},
	{"msg", "msqid", func(id int) error { return ipcCtl(unix.SYS_MSGCTL, id, 0, unix.IPC_RMID) }},
	{"sem", "semid", func(id int) error { return ipcCtl(unix.SYS_SEMCTL, id, 0, unix.IPC_RMID) }},
}

func ipcCtl(trap uintptr, id, semnum, cmd int) error {
	var err syscall.Errno
	if trap == unix.SYS_SEMCTL {
		_, _, err = syscall.RawSyscall6(trap, uintptr(id), uintptr(semnum), uintptr(cmd), 0, 0, 0)
	} else {
		_, _, err = syscall.RawSyscall(trap, uintptr(id), uintptr(cmd), 0)
	}
	if err != 0 {
		return err
	}
	return nil
}

// RemoveIPC removes every System V IPC object (shared memory segment,
// message queue, semaphore set) whose owner or creator is uid. They
// outlive every process: left alone they would carry data from one graded
// case or episode to the next holder of the uid, and a segment pins
// memory no rlimit of the uid counts. Removing one needs its owner's or
// creator's effective uid (root has no CAP_SYS_ADMIN), so the removal runs
// on a locked OS thread whose effective uid alone is switched to uid
// (setresuid on that thread only) and back.
func RemoveIPC(uid int) error {
	if uid < 0 {
		return nil
	}
	type object struct {
		kind int
		id   int
	}
	var objs []object
	for k, kind := range ipcKinds {
		data, err := os.ReadFile("/proc/sysvipc/" + kind.file)
		if errors.Is(err, os.ErrNotExist) {
			continue // a kernel without System V IPC
		}
		if err != nil {
			return fmt.Errorf("list System V IPC: %w", err)
		}
		ids, err := ipcObjectsOf(string(data), kind.idCol, uid)
		if err != nil {
			return fmt.Errorf("/proc/sysvipc/%s: %w", kind.file, err)
		}
		for _, id := range ids {
			objs = append(objs, object{k, id})
		}
	}
	if len(objs) == 0 {
		return nil
	}
	return onOwnThread(func(restored *bool) error {
		return asEUIDLocked(uid, restored, func() error {
			var errs []error
			for _, o := range objs {
				err := ipcKinds[o.kind].rmid(o.id)
				if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EIDRM) {
					errs = append(errs, fmt.Errorf("remove System V %s %d of uid %d: %w", ipcKinds[o.kind].file, o.id, uid, err))
				}
			}
			return errors.Join(errs...)
		})
	})
}

// ipcObjectsOf returns the ids of the objects in a /proc/sysvipc listing
// whose uid or cuid column is uid.
func ipcObjectsOf(listing, idCol string, uid int) ([]int, error) {
	lines := strings.Split(strings.TrimSpace(listing), "\n")
	header := strings.Fields(lines[0])
	idAt, uidAt, cuidAt := -1, -1, -1
	for i, col := range header {
		switch col {
		case idCol:
			idAt = i
		case "uid":
			uidAt = i
		case "cuid":
			cuidAt = i
		}
	}
	if idAt < 0 || uidAt < 0 || cuidAt < 0 {
		return nil, fmt.Errorf("header %q lacks %s, uid or cuid", lines[0], idCol)
	}
	want := strconv.Itoa(uid)
	var ids []int
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) <= max(idAt, uidAt, cuidAt) || (f[uidAt] != want && f[cuidAt] != want) {
			continue
		}
		id, err := strconv.Atoi(f[idAt])
		if err != nil {
			return nil, fmt.Errorf("id %q: %w", f[idAt], err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// asEUIDLocked runs fn with this thread's effective uid set to uid (real
// and saved stay root's, so it can switch back), then restores it; the
// caller must hold the OS thread locked. restored reports whether the
// thread's uids and capabilities are as they were.
func asEUIDLocked(uid int, restored *bool, fn func() error) (err error) {
	var hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var capsBefore, capsAfter [2]unix.CapUserData
	if err := unix.Capget(&hdr, &capsBefore[0]); err != nil {
		*restored = true // nothing changed yet
		return fmt.Errorf("capget: %w", err)
	}
	keep := ^uintptr(0) // -1: leave that id as it is
	defer func() {
		syscall.RawSyscall(unix.SYS_SETRESUID, keep, 0, keep)
		r, e, s := unix.Getresuid() // this thread's
		capErr := unix.Capget(&hdr, &capsAfter[0])
		*restored = r == 0 && e == 0 && s == 0 && capErr == nil && capsAfter == capsBefore
		if !*restored && err == nil {
			err = fmt.Errorf("as euid %d: ids not restored (%d/%d/%d)", uid, r, e, s)
		}
	}()
	if _, _, errno := syscall.RawSyscall(unix.SYS_SETRESUID, keep, uintptr(uid), keep); errno != 0 {
		return fmt.Errorf("as euid %d: setresuid: %w", uid, errno)
	}
	return fn()
}
