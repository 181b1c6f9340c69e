package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// isolationMarker starts the line the episode code prints its findings on.
const isolationMarker = "AGENTPEN-ISOLATION "

// isolationCode is what the probe runs as an episode's code (run_python):
// its namespaces as /proc/self/ns shows them, its interfaces by
// if_nameindex, and a vsock socket it tries to open.
const isolationCode = `import json, os, socket
r = {"pid_ns": os.readlink("/proc/self/ns/pid"), "net_ns": os.readlink("/proc/self/ns/net"),
     "interfaces": [n for _, n in socket.if_nameindex()], "uid": os.getuid()}
try:
    socket.socket(40, socket.SOCK_STREAM).close()
    r["vsock"] = "opened"
except OSError as e:
    r["vsock"] = "denied: " + os.strerror(e.errno)
print("` + isolationMarker + `" + json.dumps(r))
`

// EpisodeIsolation asks the workbench serving at listen ("unix:PATH" or
// "tcp:PORT", on this host's loopback) for its sandbox mode and runs
// isolationCode as one of its episodes (a stateless POST /step of
// run_python), and compares that code's namespaces with the server
// process's own (read from /proc), or with the probe's own when selfNS
// (wire.Request.SelfNS).
func EpisodeIsolation(ctx context.Context, listen string, selfNS bool, timeout time.Duration) (Isolation, error) {
	return episodeIsolation(ctx, "/proc", listen, selfNS, timeout)
}

func episodeIsolation(ctx context.Context, proc, listen string, selfNS bool, timeout time.Duration) (Isolation, error) {
	iso := Isolation{ServerFrom: "process"}
	pid := "self"
	if selfNS {
		iso.ServerFrom = "exec"
	} else {
		p, err := findProcess(proc, listen, os.Getpid())
		if err != nil {
			return iso, err
		}
		pid = strconv.Itoa(p.Pid)
	}
	var err error
	for _, ns := range []struct {
		kind string
		into *string
	}{{"pid", &iso.ServerPidNS}, {"net", &iso.ServerNetNS}} {
		if *ns.into, err = os.Readlink(filepath.Join(proc, pid, "ns", ns.kind)); err != nil {
			return iso, fmt.Errorf("the server's %s namespace: %w", ns.kind, err)
		}
	}
	kind, target, err := parseListen(listen)
	if err != nil {
		return iso, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	hc := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			if kind == "unix" {
				return d.DialContext(ctx, "unix", target)
			}
			return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", target))
		}}}
	var meta struct {
		Sandbox string `json:"sandbox"`
	}
	if err := call(ctx, hc, http.MethodGet, "/metadata", nil, &meta); err != nil {
		return iso, err
	}
	iso.Sandbox = meta.Sandbox
	body, _ := json.Marshal(map[string]any{"action": map[string]any{"tool": "run_python", "args": map[string]string{"code": isolationCode}}})
	var step struct {
		Observation struct {
			Output string `json:"output"`
			Error  string `json:"error"`
		} `json:"observation"`
	}
	if err := call(ctx, hc, http.MethodPost, "/step", body, &step); err != nil {
		return iso, err
	}
	_, found, ok := strings.Cut(step.Observation.Output, isolationMarker)
	if !ok {
		return iso, fmt.Errorf("the episode printed no findings: %q %q", clip(step.Observation.Output), step.Observation.Error)
	}
	found, _, _ = strings.Cut(found, "\n")
	var r struct {
		PidNS      string   `json:"pid_ns"`
		NetNS      string   `json:"net_ns"`
		Interfaces []string `json:"interfaces"`
		VSock      string   `json:"vsock"`
		UID        int      `json:"uid"`
	}
	if err := json.Unmarshal([]byte(found), &r); err != nil {
		return iso, fmt.Errorf("the episode's findings %q: %w", clip(found), err)
	}
	iso.EpisodePidNS, iso.EpisodeNetNS, iso.Interfaces, iso.VSock, iso.EpisodeUID = r.PidNS, r.NetNS, r.Interfaces, r.VSock, r.UID
	return iso, nil
}

// call makes one request of the workbench and decodes its JSON reply.
func call(ctx context.Context, hc *http.Client, method, path string, body []byte, into any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://workbench"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: status %d: %s", method, path, resp.StatusCode, clip(string(b)))
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}
