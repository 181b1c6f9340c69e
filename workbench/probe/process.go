package probe

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ArgvDigest is the digest a Process reports for argv.
func ArgvDigest(argv []string) string {
	sum := sha256.Sum256([]byte(strings.Join(argv, "\x00")))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// FindProcess finds the process listening on listen ("tcp:PORT",
// "unix:PATH") or, for "", the container's main process, and reads its
// custody evidence from /proc.
func FindProcess(listen string) (Process, error) {
	return findProcess("/proc", listen, os.Getpid())
}

// SuffixDigest is the digest of the last n arguments of pid's command
// line (ArgvDigest's form), "" when it has fewer.
func SuffixDigest(pid, n int) string {
	argv, err := readArgv("/proc", pid)
	if err != nil || n <= 0 || len(argv) < n {
		return ""
	}
	return ArgvDigest(argv[len(argv)-n:])
}

func parseListen(listen string) (kind, target string, err error) {
	if listen == "" {
		return "main", "", nil
	}
	kind, target, ok := strings.Cut(listen, ":")
	switch {
	case ok && kind == "tcp":
		if p, err := strconv.Atoi(target); err == nil && p > 0 && p < 65536 {
			return kind, target, nil
		}
	case ok && kind == "unix" && strings.HasPrefix(target, "/"):
		return kind, target, nil
	}
	return "", "", fmt.Errorf("listen %q: want tcp:PORT, unix:/PATH or empty: %w", listen, ErrInvalid)
}

// findProcess is FindProcess over the /proc at proc; self (the probe's own
// pid, never custody evidence) is skipped.
func findProcess(proc, listen string, self int) (Process, error) {
	kind, target, err := parseListen(listen)
	if err != nil {
		return Process{}, err
	}
	var pids []int
	switch kind {
	case "main":
		pid, err := mainPid(proc, self)
		if err != nil {
			return Process{}, err
		}
		pids = []int{pid}
	default:
		inodes := listeningInodes(proc, kind, target)
		if len(inodes) == 0 {
			return Process{}, fmt.Errorf("nothing listens on %s", listen)
		}
		pids = holders(proc, inodes, self)
		if len(pids) == 0 {
			return Process{}, fmt.Errorf("no process holds the socket listening on %s", listen)
		}
	}
	p, err := readProcess(proc, pids[0])
	if err != nil {
		return Process{}, err
	}
	if len(pids) > 1 {
		p.Pids = pids
	}
	p.Serves = listen
	if kind == "main" {
		p.Serves = "main"
	}
	return p, nil
}

// listeningInodes are the inodes of the sockets listening on the TCP port
// (v4 and v6) or at the unix path, from /proc/net.
func listeningInodes(proc, kind, target string) map[string]bool {
	out := map[string]bool{}
	switch kind {
	case "tcp":
		port, _ := strconv.Atoi(target)
		hexPort := fmt.Sprintf("%04X", port)
		for _, f := range []string{"net/tcp", "net/tcp6"} {
			eachLine(filepath.Join(proc, f), func(fields []string) {
				// sl local_address rem_address st ... uid timeout inode
				if len(fields) >= 10 && fields[3] == "0A" && strings.HasSuffix(fields[1], ":"+hexPort) {
					out[fields[9]] = true
				}
			})
		}
	case "unix":
		for ino := range unixListeners(filepath.Join(proc, "net/unix"), target) {
			out[ino] = true
		}
	}
	return out
}

// unixListeners reads a /proc/net/unix table (the file at path) and
// returns the inodes of the sockets listening at target that it can read
// unambiguously. The kernel prints a socket's path as it is, newlines
// included, so code that can bind a socket can add lines of its own
// making (a path of "/x\n<a line naming the workbench's socket>"): a line
// is taken only when it has exactly the fields of a record (no path with
// a space), and an inode only when one record alone names it. Every
// socket of the namespace has its own line, so a forged line repeats an
// inode the table already holds, and both are refused.
func unixListeners(path, target string) map[string]bool {
	seen := map[string]int{} // inode -> records naming it
	cand := map[string]bool{}
	eachLine(path, func(fields []string) {
		// Num RefCount Protocol Flags Type St Inode [Path]
		if len(fields) < 7 || !strings.HasSuffix(fields[0], ":") {
			return
		}
		seen[fields[6]]++
		if len(fields) != 8 || fields[7] != target {
			return
		}
		if flags, err := strconv.ParseUint(fields[3], 16, 32); err == nil && flags&0x10000 != 0 {
			cand[fields[6]] = true
		}
	})
	for ino := range cand {
		if seen[ino] != 1 {
			delete(cand, ino)
		}
	}
	return cand
}

// holders are the pids (ascending, this process excepted) with an open
// descriptor on one of the socket inodes.
func holders(proc string, inodes map[string]bool, self int) []int {
	var out []int
	for _, pid := range pidList(proc) {
		if pid == self {
			continue
		}
		dir := filepath.Join(proc, strconv.Itoa(pid), "fd")
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			l, err := os.Readlink(filepath.Join(dir, e.Name()))
			if ino, ok := strings.CutPrefix(l, "socket:["); err == nil && ok && inodes[strings.TrimSuffix(ino, "]")] {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// mainPid is PID 1, or its lowest-numbered child when PID 1 is an init
// (docker-init, tini, dumb-init).
func mainPid(proc string, self int) (int, error) {
	argv, err := readArgv(proc, 1)
	if err != nil {
		return 0, err
	}
	if len(argv) == 0 || !slices.Contains([]string{"docker-init", "tini", "tini-static", "dumb-init"}, filepath.Base(argv[0])) {
		return 1, nil
	}
	for _, pid := range pidList(proc) {
		if pid == 1 || pid == self {
			continue
		}
		if st, err := readStatus(proc, pid); err == nil && st["PPid"] == "1" {
			return pid, nil
		}
	}
	return 0, errors.New("PID 1 is an init with no child")
}

func readProcess(proc string, pid int) (Process, error) {
	argv, err := readArgv(proc, pid)
	if err != nil {
		return Process{}, err
	}
	st, err := readStatus(proc, pid)
	if err != nil {
		return Process{}, err
	}
	p := Process{Pid: pid, ArgvDigest: ArgvDigest(argv), Argc: len(argv), CapEff: st["CapEff"], CapBnd: st["CapBnd"], NoNewPrivs: st["NoNewPrivs"] == "1"}
	p.Exe, _ = os.Readlink(filepath.Join(proc, strconv.Itoa(pid), "exe"))
	p.Cwd, _ = os.Readlink(filepath.Join(proc, strconv.Itoa(pid), "cwd"))
	if f := strings.Fields(st["Uid"]); len(f) > 0 {
		p.UID, _ = strconv.Atoi(f[0])
	}
	p.Seccomp, _ = strconv.Atoi(st["Seccomp"])
	return p, nil
}

func readArgv(proc string, pid int) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return nil, err
	}
	b = []byte(strings.TrimSuffix(string(b), "\x00"))
	if len(b) == 0 {
		return nil, fmt.Errorf("pid %d: empty command line", pid)
	}
	return strings.Split(string(b), "\x00"), nil
}

func readStatus(proc string, pid int) (map[string]string, error) {
	f, err := os.Open(filepath.Join(proc, strconv.Itoa(pid), "status"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out, sc.Err()
}

func pidList(proc string) []int {
	ents, _ := os.ReadDir(proc)
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

func eachLine(path string, fn func([]string)) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	first := true
	for sc.Scan() {
		if first { // the header line
			first = false
			continue
		}
		fn(strings.Fields(sc.Text()))
	}
}
