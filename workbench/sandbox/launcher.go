package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// launcherArg0 is argv[0] of a launcher process.
const launcherArg0 = "agentpen-sandbox-launcher"

// The descriptors of a launcher: 3 is its report pipe (made close-on-exec
// before the exec, so the program never sees it); in a namespaced run 4
// is the cancel pipe and 5..7 the episode's user, mount and network
// namespaces; a fork server's template has 8, the server's /proc (where it
// is writable, unlike the episode's). Everything from 4 up is closed
// before the exec.
const (
	launcherReportFD = 3
	launcherCancelFD = 4
	launcherUserNSFD = 5
	launcherMntNSFD  = 6
	launcherNetNSFD  = 7
	launcherProcFD   = 8
)

// Launcher modes: the header's first word (testdata/launcher_amd64.s).
const (
	// modeExec: the launcher runs tableProgram and execs the program.
	modeExec uint64 = 0
	// modeNamespaces: the launcher runs tableBefore, forks the PID
	// namespace's init and the program, and reaps them.
	modeNamespaces uint64 = 1
)

// The tables of a launcher, by the number a report carries.
const (
	tableBefore  = 0 // the launcher, before it forks
	tableInit    = 1 // the PID namespace's init
	tableProgram = 2 // the program's process, before the exec
	tableAfter   = 3 // the launcher, after it forked
	tableOwn     = 4 // the launcher's own steps (report only)
	tableFork    = 5 // a fork server's run (forkserver.py; report only)
)

// The launcher's memory layout: one read+execute segment holding the ELF
// header, the program headers, launcherCode, the header, the data the
// calls point to and the tables, loaded at loadBase; and 64 writable bytes
// at scratchAddr.
const (
	loadBase    = 0x400000
	scratchAddr = 0x500000
	ehdrSize    = 64
	phdrSize    = 56
	headerSize  = 48
	entrySize   = 56
)

// A call is one entry of a launcher table: a system call and its six
// arguments (numbers, or addresses of the image's data).
type call struct {
	nr   uintptr
	args [6]uint64
	// ignore: a failure is not reported, and the launcher goes on.
	ignore bool
	// what words the call in a failure ("chdir /ws").
	what string
}

func sys(nr uintptr, what string, args ...uint64) call {
	c := call{nr: nr, what: what}
	copy(c.args[:], args)
	return c
}

// image is a launcher being built: its mode, the data its calls point to,
// and its tables. The calls' addresses are absolute (the image is not
// position-independent), so data is laid out right after the header,
// whose place is fixed, and the tables after the data.
type image struct {
	mode   uint64
	data   []byte
	tables [4][]call
}

// dataAddr is where an image's data starts once loaded.
func dataAddr() uint64 {
	return loadBase + ehdrSize + 2*phdrSize + uint64(len(launcherCode)) + headerSize
}

// put appends b to the data, 8-byte aligned, and returns its address.
func (im *image) put(b []byte) uint64 {
	for len(im.data)%8 != 0 {
		im.data = append(im.data, 0)
	}
	a := dataAddr() + uint64(len(im.data))
	im.data = append(im.data, b...)
	return a
}

// str puts a NUL-terminated string.
func (im *image) str(s string) uint64 { return im.put(append([]byte(s), 0)) }

// words puts 64-bit words.
func (im *image) words(ws ...uint64) uint64 {
	var b []byte
	for _, w := range ws {
		b = binary.LittleEndian.AppendUint64(b, w)
	}
	return im.put(b)
}

func (im *image) add(table int, calls ...call) { im.tables[table] = append(im.tables[table], calls...) }

// executable returns the static ELF64 executable.
func (im *image) executable() []byte {
	le := binary.LittleEndian
	dataEnd := dataAddr() + uint64(len(im.data))
	for dataEnd%8 != 0 {
		im.data = append(im.data, 0)
		dataEnd++
	}
	var tables []byte
	var addrs [4]uint64
	for i, t := range im.tables {
		if len(t) == 0 {
			continue
		}
		addrs[i] = dataEnd + uint64(len(tables))
		tables = le.AppendUint64(tables, uint64(len(t)))
		for _, c := range t {
			nr := uint64(c.nr)
			if c.ignore {
				nr |= 1 << 32
			}
			tables = le.AppendUint64(tables, nr)
			for _, a := range c.args {
				tables = le.AppendUint64(tables, a)
			}
		}
	}
	size := uint64(ehdrSize+2*phdrSize+len(launcherCode)+headerSize+len(im.data)) + uint64(len(tables))
	img := make([]byte, 0, size)
	// ELF header: 64-bit, little-endian, version 1, executable.
	img = append(img, 0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	img = le.AppendUint16(img, 2) // ET_EXEC
	img = le.AppendUint16(img, launcherMachine)
	img = le.AppendUint32(img, 1)
	img = le.AppendUint64(img, loadBase+ehdrSize+2*phdrSize) // entry
	img = le.AppendUint64(img, ehdrSize)                     // program headers
	img = le.AppendUint64(img, 0)                            // no section headers
	img = le.AppendUint32(img, 0)                            // flags
	img = le.AppendUint16(img, ehdrSize)
	img = le.AppendUint16(img, phdrSize)
	img = le.AppendUint16(img, 2) // two program headers
	img = le.AppendUint16(img, 0)
	img = le.AppendUint16(img, 0)
	img = le.AppendUint16(img, 0)
	segment := func(flags uint32, vaddr, filesz, memsz uint64) {
		img = le.AppendUint32(img, 1) // PT_LOAD
		img = le.AppendUint32(img, flags)
		img = le.AppendUint64(img, 0) // offset
		img = le.AppendUint64(img, vaddr)
		img = le.AppendUint64(img, vaddr)
		img = le.AppendUint64(img, filesz)
		img = le.AppendUint64(img, memsz)
		img = le.AppendUint64(img, 0x1000)
	}
	segment(5, loadBase, size, size) // read+execute: the whole file
	segment(6, scratchAddr, 0, 4096) // read+write: zeroed
	img = append(img, launcherCode...)
	img = le.AppendUint64(img, im.mode)
	for _, a := range addrs {
		img = le.AppendUint64(img, a)
	}
	img = le.AppendUint64(img, scratchAddr)
	img = append(img, im.data...)
	return append(img, tables...)
}

// launcher is a sealed executable memfd of an image, kept for as long as
// its episode, and the image, to word its reports.
type launcher struct {
	file *os.File
	im   *image
}

func newLauncher(im *image) (*launcher, error) {
	if len(launcherCode) == 0 {
		return nil, fmt.Errorf("no sandbox launcher for this architecture")
	}
	fd, err := sealedExecutable(im.executable())
	if err != nil {
		return nil, fmt.Errorf("launcher: %w", err)
	}
	// The child execs /proc/self/fd/N after os/exec has put its own
	// descriptors at 0..launcherNetNSFD: N must lie above them, or the
	// child execs whatever it was given there (a namespace, a pipe).
	high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, launcherMinFD)
	unix.Close(fd)
	if err != nil {
		return nil, fmt.Errorf("launcher: %w", err)
	}
	return &launcher{file: os.NewFile(uintptr(high), "agentpen-launcher"), im: im}, nil
}

// launcherMinFD is the lowest descriptor a launcher's memfd may have.
const launcherMinFD = 64

// path is where the launcher is executed from.
func (l *launcher) path() string { return "/proc/self/fd/" + strconv.Itoa(int(l.file.Fd())) }

func (l *launcher) close() error { return l.file.Close() }

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

// A report is one 8-byte record a launcher wrote on its report pipe.
type report struct {
	tag   byte // 'F' a call or a fork failed, 'E' the exec, 'X' the program's wait status, 'R' ready, 'S' a fork server's program is about to be forked
	table byte
	index byte
	value uint32 // errno, or the wait status
}

func parseReports(b []byte) ([]report, error) {
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("launcher reported %q", b)
	}
	var out []report
	for ; len(b) > 0; b = b[8:] {
		out = append(out, report{tag: b[0], table: b[1], index: b[2], value: binary.LittleEndian.Uint32(b[4:8])})
	}
	return out, nil
}

// ownSteps word the launcher's own steps (tableOwn) by index.
var ownSteps = []string{"fork the PID namespace's init", "fork the program", "pidfd_open of the program"}

// failure words a failure report: what failed, and its errno (an error
// errors.Is can match). im is nil for a fork server's run.
func (im *image) failure(r report, program string) error {
	errno := syscall.Errno(r.value)
	what := fmt.Sprintf("step %d.%d", r.table, r.index)
	switch {
	case r.tag == 'E':
		what = "exec " + program
	case r.table == tableOwn && int(r.index) < len(ownSteps):
		what = ownSteps[r.index]
	case r.table == tableFork && int(r.index) < len(forkSteps):
		what = "fork server: " + forkSteps[r.index]
	case im != nil && r.table < tableOwn && int(r.index) < len(im.tables[r.table]):
		what = im.tables[r.table][r.index].what
	}
	return fmt.Errorf("%s: %w", what, errno)
}
