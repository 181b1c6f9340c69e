package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// DefaultListen is the address `workbench serve` listens on by default.
const DefaultListen = "127.0.0.1:8000"

// Listen opens a listener for addr: "unix:///abs/path.sock" for a unix
// socket, or "tcp://host:port" or "host:port" for TCP.
//
// A unix socket is created mode 0600 in a directory that only its owner
// can enter: a missing directory is made 0700, and an existing one must be
// a directory (not a symlink) owned by this process's user that grants
// nothing to group or others. A stale socket file at the path is replaced;
// any other file there is an error. Closing the listener removes the socket.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	if path, ok := strings.CutPrefix(addr, "unix://"); ok {
		if err := prepareUnixPath(path); err != nil {
			return nil, fmt.Errorf("listen %s: %w", addr, err)
		}
		ln, err := lc.Listen(ctx, "unix", path)
		if err != nil {
			return nil, fmt.Errorf("listen %s: %w", addr, err)
		}
		// The directory already keeps everyone else out; the mode says so
		// too, for whoever moves the socket.
		if err := os.Chmod(path, 0o600); err != nil {
			ln.Close()
			return nil, fmt.Errorf("listen %s: %w", addr, err)
		}
		return ln, nil
	}
	hostport := strings.TrimPrefix(addr, "tcp://")
	if strings.Contains(hostport, "://") {
		return nil, fmt.Errorf("listen %q: scheme must be unix:// or tcp://", addr)
	}
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		return nil, fmt.Errorf("listen %q: want host:port, tcp://host:port or unix:///path: %w", addr, err)
	}
	ln, err := lc.Listen(ctx, "tcp", hostport)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return ln, nil
}

func prepareUnixPath(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("socket path %q must be absolute", path)
	}
	dir := filepath.Dir(path)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("make socket directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket directory %s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("socket directory %s is owned by uid %d, not by this server (uid %d)", dir, st.Uid, os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("socket directory %s has mode %04o: it must grant nothing to group or others (0700)", dir, perm)
	}
	fi, err = os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("socket path: %w", err)
	case fi.Mode()&fs.ModeSocket == 0:
		return fmt.Errorf("socket path %s exists and is not a socket", path)
	}
	// A socket left by a server that died; nothing listens on it, or the
	// listen below fails on the address in use.
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return fmt.Errorf("socket %s is in use by another server", path)
	}
	return os.Remove(path)
}
