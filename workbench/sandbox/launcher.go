package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// launcherArg0 is argv[0] of a launcher process.
const launcherArg0 = "agentpen-sandbox-launcher"

// launcherErrFD is the descriptor a launcher reports a failure on (its
// code has it built in); the launcher makes it close-on-exec, so the
// program never sees it.
const launcherErrFD = 3

// The launcher is a static ELF of a few hundred bytes, not a Go program:
// launcherCode (per architecture) followed by the table of limits. It is
// kept in a sealed memfd per distinct set of limits and executed through
// /proc/self/fd; exec'ing it costs tens of microseconds, where a Go
// launcher's runtime start-up cost about 1.5 ms.
var launchers struct {
	mu sync.Mutex
	fd map[string]int
}

// launcherPath returns the path (/proc/self/fd/N) of the launcher that
// sets lims.
func launcherPath(lims []rlimit) (string, error) {
	if len(launcherCode) == 0 {
		return "", fmt.Errorf("no sandbox launcher for this architecture")
	}
	var key strings.Builder
	for _, l := range lims {
		fmt.Fprintf(&key, "%d=%d,", l.resource, l.value)
	}
	launchers.mu.Lock()
	defer launchers.mu.Unlock()
	if fd, ok := launchers.fd[key.String()]; ok {
		return "/proc/self/fd/" + strconv.Itoa(fd), nil
	}
	fd, err := sealedExecutable(launcherImage(lims))
	if err != nil {
		return "", fmt.Errorf("launcher: %w", err)
	}
	if launchers.fd == nil {
		launchers.fd = map[string]int{}
	}
	launchers.fd[key.String()] = fd
	return "/proc/self/fd/" + strconv.Itoa(fd), nil
}

// sealedExecutable puts image into a close-on-exec memfd that can no
// longer be written, shrunk or grown, and returns its descriptor.
func sealedExecutable(image []byte) (int, error) {
	const mfdExec = 0x10 // MFD_EXEC (Linux 6.3); older kernels refuse it
	fd, err := unix.MemfdCreate("agentpen-launcher", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|mfdExec)
	if errors.Is(err, unix.EINVAL) {
		fd, err = unix.MemfdCreate("agentpen-launcher", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return -1, fmt.Errorf("memfd_create: %w", err)
	}
	if _, err := unix.Write(fd, image); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("write memfd: %w", err)
	}
	seals := unix.F_SEAL_WRITE | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("seal memfd: %w", err)
	}
	if err := unix.Fchmod(fd, 0o555); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("chmod memfd: %w", err)
	}
	return fd, nil
}

// launcherImage is a static ELF64 executable: one read+execute segment
// holding the header, launcherCode and the limits table (a count, then
// resource, soft and hard limit per entry, 64 bits each).
func launcherImage(lims []rlimit) []byte {
	const (
		base     = 0x400000
		ehdrSize = 64
		phdrSize = 56
	)
	le := binary.LittleEndian
	var table []byte
	table = le.AppendUint64(table, uint64(len(lims)))
	for _, l := range lims {
		table = le.AppendUint64(table, uint64(l.resource))
		table = le.AppendUint64(table, l.value)
		table = le.AppendUint64(table, l.value)
	}
	size := uint64(ehdrSize + phdrSize + len(launcherCode) + len(table))
	img := make([]byte, 0, size)
	// ELF header: 64-bit, little-endian, version 1, executable.
	img = append(img, 0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	img = le.AppendUint16(img, 2) // ET_EXEC
	img = le.AppendUint16(img, launcherMachine)
	img = le.AppendUint32(img, 1)
	img = le.AppendUint64(img, base+ehdrSize+phdrSize) // entry
	img = le.AppendUint64(img, ehdrSize)               // program headers
	img = le.AppendUint64(img, 0)                      // no section headers
	img = le.AppendUint32(img, 0)                      // flags
	img = le.AppendUint16(img, ehdrSize)
	img = le.AppendUint16(img, phdrSize)
	img = le.AppendUint16(img, 1) // one program header
	img = le.AppendUint16(img, 0)
	img = le.AppendUint16(img, 0)
	img = le.AppendUint16(img, 0)
	// PT_LOAD, read+execute, the whole file at base.
	img = le.AppendUint32(img, 1)
	img = le.AppendUint32(img, 5)
	img = le.AppendUint64(img, 0)
	img = le.AppendUint64(img, base)
	img = le.AppendUint64(img, base)
	img = le.AppendUint64(img, size)
	img = le.AppendUint64(img, size)
	img = le.AppendUint64(img, 0x1000)
	img = append(img, launcherCode...)
	return append(img, table...)
}

// launchFailure words what a launcher reported on launcherErrFD: a tag
// ('L' a limit, 'E' the exec), the limit's index and the errno.
func launchFailure(msg []byte, lims []rlimit, program string) string {
	if len(msg) != 3 {
		return fmt.Sprintf("launcher said %q", msg)
	}
	errno := syscall.Errno(msg[2])
	switch msg[0] {
	case 'L':
		if i := int(msg[1]); i < len(lims) {
			return fmt.Sprintf("setrlimit %s %d: %v", lims[i].name, lims[i].value, errno)
		}
	case 'E':
		return fmt.Sprintf("exec %s: %v", program, errno)
	}
	return fmt.Sprintf("launcher said %q", msg)
}
