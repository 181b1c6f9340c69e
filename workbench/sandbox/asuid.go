package sandbox

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// AsUID runs fn on an OS thread of its own whose filesystem uid and gid
// are uid, so every file operation in fn is permission-checked as uid and
// what it creates belongs to uid. A negative uid runs fn as it is. fn must
// not start goroutines that touch files on its behalf: they would run on
// other threads, as root.
func AsUID(uid int, fn func() error) error {
	if uid < 0 {
		return fn()
	}
	return onOwnThread(func(restored *bool) error { return asUIDLocked(uid, fn, restored) })
}

func asUIDLocked(uid int, fn func() error, restored *bool) (err error) {
	prevGID, _ := unix.SetfsgidRetGid(uid)
	prevUID, _ := unix.SetfsuidRetUid(uid)
	defer func() {
		unix.SetfsuidRetUid(prevUID)
		unix.SetfsgidRetGid(prevGID)
		fsuid, _ := unix.SetfsuidRetUid(-1)
		fsgid, _ := unix.SetfsgidRetGid(-1)
		*restored = fsuid == prevUID && fsgid == prevGID
		if !*restored && err == nil {
			err = fmt.Errorf("as uid %d: filesystem ids not restored (%d/%d)", uid, fsuid, fsgid)
		}
	}()
	fsuid, _ := unix.SetfsuidRetUid(-1)
	fsgid, _ := unix.SetfsgidRetGid(-1)
	if fsuid != uid || fsgid != uid {
		return fmt.Errorf("as uid %d: setfsuid gave %d/%d", uid, fsuid, fsgid)
	}
	return fn()
}
