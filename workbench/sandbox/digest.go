package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// DigestBytes is the default cap of Digest: a tree holding more file bytes
// is not hashed, so a run on it cannot be shown to change nothing.
const DigestBytes = 64 << 20

// ErrDigestTooLarge is returned (wrapped) by Digest when the files hold
// more than the cap.
var ErrDigestTooLarge = errors.New("the files are too large to hash")

// Digest hashes every entry under root that skip does not exclude: its
// path, type and mode, modification and change times, and a regular
// file's bytes or a symlink's target. The change time moves with any
// change of an entry's metadata (extended attributes included), and no
// unprivileged code can set it. Directories skip excludes are not entered.
// Any entry that cannot be read, a tree deeper than WalkDepth, or more
// than capBytes of file contents is an error.
func Digest(root string, skip func(rel string) bool, capBytes int64) (string, error) {
	h := sha256.New()
	var total int64
	err := Walk(root, func(e *Entry) bool { return !skip(e.Rel) }, true, func(e *Entry) error {
		if e.Left || skip(e.Rel) {
			return nil
		}
		st := &e.Stat
		io.WriteString(h, e.Rel+"\x00"+strconv.FormatUint(uint64(st.Mode), 10)+"\x00"+
			strconv.FormatInt(st.Mtim.Nano(), 10)+"\x00"+strconv.FormatInt(st.Ctim.Nano(), 10)+"\x00")
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			buf := make([]byte, unix.PathMax)
			n, err := unix.Readlinkat(e.DirFD, e.Name, buf)
			if err != nil {
				return fmt.Errorf("readlink %s: %w", e.Rel, err)
			}
			h.Write(buf[:n])
		case unix.S_IFREG:
			total += st.Size
			if total > capBytes {
				return fmt.Errorf("digest %s: %w", root, ErrDigestTooLarge)
			}
			fd, err := unix.Openat(e.DirFD, e.Name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("open %s: %w", e.Rel, err)
			}
			f := os.NewFile(uintptr(fd), e.Rel)
			var fst unix.Stat_t
			if err := unix.Fstat(fd, &fst); err != nil || fst.Mode&unix.S_IFMT != unix.S_IFREG {
				f.Close()
				return fmt.Errorf("digest %s: %w", e.Rel, ErrNotRegular)
			}
			_, err = io.Copy(h, io.LimitReader(f, capBytes-total+st.Size+1))
			f.Close()
			if err != nil {
				return fmt.Errorf("read %s: %w", e.Rel, err)
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
