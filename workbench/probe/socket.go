package probe

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// knownSocketPaths are where a Docker daemon's socket is usually found or
// mounted (agentpen mounts it at /run/agentpen/docker.sock when asked).
var knownSocketPaths = []string{
	"/var/run/docker.sock", "/run/docker.sock", "/docker.sock", "/run/agentpen/docker.sock",
	"/var/run/docker/docker.sock", "/run/podman/podman.sock", "/run/containerd/containerd.sock",
}

// socketGlobs catch a rootless daemon's socket in a user runtime directory.
var socketGlobs = []string{"/run/user/*/docker*.sock", "/run/user/*/docker/*.sock", "/var/run/user/*/docker*.sock"}

// FindSockets looks for a Docker socket in this container: the known
// paths, the rootless globs, DOCKER_HOST (as getenv reads it), every mount
// point that is a socket and every docker.sock directly inside a mount
// point. It lists what it found, sockets or not, sorted by path.
func FindSockets(ctx context.Context, getenv func(string) string) []Socket {
	return findSockets(ctx, "/", getenv)
}

func findSockets(ctx context.Context, root string, getenv func(string) string) []Socket {
	found := map[string]Socket{}
	look := func(p, how string) {
		if _, seen := found[p]; seen {
			return
		}
		fi, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			return
		}
		s := Socket{Path: p, How: how, IsSocket: fi.Mode()&os.ModeSocket != 0}
		if how == "mount" && !s.IsSocket {
			return // an ordinary mount point
		}
		if s.IsSocket {
			d := net.Dialer{Timeout: time.Second}
			if c, err := d.DialContext(ctx, "unix", filepath.Join(root, p)); err == nil {
				c.Close()
				s.Connectable = true
			}
		}
		found[p] = s
	}
	for _, p := range knownSocketPaths {
		look(p, "known_path")
	}
	for _, g := range socketGlobs {
		matches, _ := filepath.Glob(filepath.Join(root, g))
		for _, m := range matches {
			rel, err := filepath.Rel(root, m)
			if err == nil {
				look("/"+rel, "glob")
			}
		}
	}
	if h := getenv("DOCKER_HOST"); h != "" {
		if p, ok := strings.CutPrefix(h, "unix://"); ok && strings.HasPrefix(p, "/") {
			look(filepath.Clean(p), "env")
		} else {
			found[h] = Socket{Path: h, How: "env"}
		}
	}
	for _, mp := range mountPoints(filepath.Join(root, "proc/self/mountinfo")) {
		look(mp, "mount")
		look(filepath.Join(mp, "docker.sock"), "mount")
	}
	out := make([]Socket, 0, len(found))
	for _, s := range found {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

var (
	hostnameRoot = regexp.MustCompile(`/containers/([0-9a-f]{64})/hostname$`)
	// podHostsRoot is the root of a pod's /etc/hosts, which the kubelet
	// writes under the pod's UID (a pod's /etc/hostname is its sandbox's,
	// which names no pod).
	podHostsRoot = regexp.MustCompile(`/pods/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/etc-hosts$`)
)

// containerID is the id of the container (Docker's, or a pod's UID) a
// mountinfo file names in the root of its /etc/hostname mount (Docker)
// or its /etc/hosts mount (the kubelet), or "".
func containerID(mountinfo string) string {
	f, err := os.Open(mountinfo)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	docker := ""
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		root := unescapeMount(fields[3])
		switch unescapeMount(fields[4]) {
		case "/etc/hostname":
			if m := hostnameRoot.FindStringSubmatch(root); m != nil && docker == "" {
				docker = m[1]
			}
		case "/etc/hosts":
			// A pod's UID wins: on a node whose runtime is Docker
			// (cri-dockerd) a pod's /etc/hostname is a Docker
			// container's, not the pod's.
			if m := podHostsRoot.FindStringSubmatch(root); m != nil {
				return m[1]
			}
		}
	}
	return docker
}

// mountPoints reads the mount points of a mountinfo file (field 5, with
// its octal escapes undone).
func mountPoints(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 5 {
			out = append(out, unescapeMount(fields[4]))
		}
	}
	return out
}

func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
