package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Probe kinds of a Batch.
const (
	KindHTTP    = "http"
	KindTCP     = "tcp"
	KindSocket  = "socket"
	KindProcess = "process"
	// KindUnix connects to a unix socket (Addr is its path).
	KindUnix = "unix"
	// KindInterfaces lists the network interfaces of the container
	// (/sys/class/net): a container without a network has "lo" only.
	KindInterfaces = "interfaces"
	// KindUIDBlock reads the uid block (WORKBENCH_UID_BASE and
	// WORKBENCH_UID_COUNT, nothing else) from the environment of the
	// process listening at Listen.
	KindUIDBlock = "uid_block"
	// KindFile looks at the file at Path as root (never reading it) and
	// tries to open it for reading as the uid As (ProbeFile): what a
	// sandbox uid can read.
	KindFile = "file"
	// KindEpisode runs code as an episode of the workbench serving at
	// Listen and reports its isolation (EpisodeIsolation).
	KindEpisode = "episode"
)

// Limits of a Batch.
const (
	// MaxBatch is the most probes one batch may hold.
	MaxBatch = 256
	// MaxTimeout bounds any one probe of a batch.
	MaxTimeout = 30 * time.Second
	// maxBody is the most of a reply body a probe with Body returns.
	maxBody = 64 << 10
)

// Batch is a set of probes run at once in one process, so a container is
// probed with one docker exec and its probes wait out their timeouts
// together. It is the JSON `workbench probe --batch` takes.
type Batch struct {
	Probes []Request `json:"probes"`
}

// Request is one probe of a Batch.
type Request struct {
	// ID names the probe in the results; unique in the batch, required.
	ID string `json:"id"`
	// Kind is one of the Kind constants.
	Kind string `json:"kind"`
	// URL, Method and Expect are an HTTP probe's (see Config).
	URL    string `json:"url,omitempty"`
	Method string `json:"method,omitempty"`
	Expect []int  `json:"expect,omitempty"`
	// HeaderEnv maps a request header to the environment variable whose
	// value it carries, so a key never appears in the command line.
	HeaderEnv map[string]string `json:"header_env,omitempty"`
	// Body asks for the reply body in the result, when it is JSON (at most
	// 64 KiB).
	Body bool `json:"body,omitempty"`
	// Addr is a TCP probe's host:port, a unix probe's socket path.
	Addr string `json:"addr,omitempty"`
	// Path is a file probe's file (absolute, clean).
	Path string `json:"path,omitempty"`
	// Unix is the socket an HTTP probe's request goes to (see Config.Unix).
	Unix string `json:"unix,omitempty"`
	// As runs a unix or TCP probe's connect, or a file probe's open, as
	// this uid (and gid), not root, to show what a sandbox uid can reach;
	// zero keeps root.
	As int `json:"as,omitempty"`
	// Listen is a process, uid_block or episode probe's target:
	// "tcp:PORT", "unix:PATH", or (a process probe) empty for the
	// container's main process (PID 1, or its first child when PID 1 is
	// an init).
	Listen string `json:"listen,omitempty"`
	// TimeoutMS bounds the probe; zero means DefaultTimeout.
	TimeoutMS int `json:"timeout_ms,omitempty"`
}

// BatchResult is what RunBatch prints: the id of the container it ran in
// and one Outcome per request, in the requests' order.
type BatchResult struct {
	// ContainerID is the Docker container this process runs in, read from
	// /proc/self/mountinfo (the daemon bind-mounts
	// <root>/containers/<id>/hostname at /etc/hostname); empty when it is
	// not found. It ties the results to a container.
	ContainerID string    `json:"container_id,omitempty"`
	Results     []Outcome `json:"results"`
}

// Outcome is the result of one probe of a batch.
type Outcome struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Outcome string `json:"outcome"`
	// Status is an HTTP probe's reply status (0 without a reply).
	Status int `json:"status,omitempty"`
	// Error says what went wrong, for any outcome but success.
	Error     string  `json:"error,omitempty"`
	LatencyMS float64 `json:"latency_ms"`
	// Body is the reply body, when asked for and JSON.
	Body json.RawMessage `json:"body,omitempty"`
	// Sockets are what a socket probe found (see FindSockets).
	Sockets []Socket `json:"sockets,omitempty"`
	// Process is what a process probe found.
	Process *Process `json:"process,omitempty"`
	// Interfaces are what an interfaces probe found.
	Interfaces []string `json:"interfaces,omitempty"`
	// UIDBase and UIDCount are what a uid_block probe found.
	UIDBase  int `json:"uid_base,omitempty"`
	UIDCount int `json:"uid_count,omitempty"`
	// File is what a file probe found as root (absent when nothing).
	File *File `json:"file,omitempty"`
	// Isolation is what an episode probe found.
	Isolation *Isolation `json:"isolation,omitempty"`
}

// Validate checks a batch before anything runs.
func (b Batch) Validate() error {
	if len(b.Probes) == 0 || len(b.Probes) > MaxBatch {
		return fmt.Errorf("batch: %d probes, want 1..%d: %w", len(b.Probes), MaxBatch, ErrInvalid)
	}
	seen := map[string]bool{}
	for i, r := range b.Probes {
		if r.ID == "" || len(r.ID) > 200 || seen[r.ID] {
			return fmt.Errorf("batch probe %d: id %q empty, too long or repeated: %w", i, r.ID, ErrInvalid)
		}
		seen[r.ID] = true
		if r.As < 0 || r.As > 65535 || r.As > 0 && r.Kind != KindUnix && r.Kind != KindTCP && r.Kind != KindFile {
			return fmt.Errorf("batch probe %s: as %d: a uid for a unix, tcp or file probe: %w", r.ID, r.As, ErrInvalid)
		}
		if r.TimeoutMS < 0 || time.Duration(r.TimeoutMS)*time.Millisecond > MaxTimeout {
			return fmt.Errorf("batch probe %s: timeout_ms %d out of range: %w", r.ID, r.TimeoutMS, ErrInvalid)
		}
		switch r.Kind {
		case KindHTTP:
			if _, err := (Config{URL: r.URL, Method: r.Method, Expect: r.Expect, Unix: r.Unix}).Validate(); err != nil {
				return fmt.Errorf("batch probe %s: %w", r.ID, err)
			}
			for name, v := range r.HeaderEnv {
				if !validHeaderName(name) || !validEnvName(v) {
					return fmt.Errorf("batch probe %s: header_env %q=%q: %w", r.ID, name, v, ErrInvalid)
				}
			}
		case KindTCP:
			if _, _, err := net.SplitHostPort(r.Addr); err != nil {
				return fmt.Errorf("batch probe %s: addr %q: %w", r.ID, r.Addr, ErrInvalid)
			}
		case KindProcess, KindUIDBlock, KindEpisode:
			if _, _, err := parseListen(r.Listen); err != nil {
				return fmt.Errorf("batch probe %s: %w", r.ID, err)
			}
		case KindUnix:
			if !strings.HasPrefix(r.Addr, "/") || filepath.Clean(r.Addr) != r.Addr {
				return fmt.Errorf("batch probe %s: socket %q: want an absolute clean path: %w", r.ID, r.Addr, ErrInvalid)
			}
		case KindFile:
			if !strings.HasPrefix(r.Path, "/") || filepath.Clean(r.Path) != r.Path {
				return fmt.Errorf("batch probe %s: path %q: want an absolute clean path: %w", r.ID, r.Path, ErrInvalid)
			}
		case KindSocket, KindInterfaces:
		default:
			return fmt.Errorf("batch probe %s: kind %q: %w", r.ID, r.Kind, ErrInvalid)
		}
	}
	return nil
}

// RunBatch validates b and runs all its probes concurrently; getenv reads
// the variables HeaderEnv names. Its error is only for an invalid batch.
func RunBatch(ctx context.Context, b Batch, getenv func(string) string) (BatchResult, error) {
	if err := b.Validate(); err != nil {
		return BatchResult{}, err
	}
	out := BatchResult{ContainerID: containerID("/proc/self/mountinfo"), Results: make([]Outcome, len(b.Probes))}
	var wg sync.WaitGroup
	for i, r := range b.Probes {
		wg.Go(func() { out.Results[i] = runOne(ctx, r, getenv) })
	}
	wg.Wait()
	return out, nil
}

func runOne(ctx context.Context, r Request, getenv func(string) string) Outcome {
	timeout := DefaultTimeout
	if r.TimeoutMS > 0 {
		timeout = time.Duration(r.TimeoutMS) * time.Millisecond
	}
	o := Outcome{ID: r.ID, Kind: r.Kind}
	start := time.Now()
	switch r.Kind {
	case KindHTTP:
		h := http.Header{}
		for name, v := range r.HeaderEnv {
			val := getenv(v)
			if val == "" {
				o.Outcome, o.Error = OutcomeError, "variable "+v+" is unset or empty"
				return o
			}
			h.Set(name, val)
		}
		var body []byte
		res, err := Check(ctx, Config{URL: r.URL, Method: r.Method, Expect: r.Expect, Header: h, Timeout: timeout, Unix: r.Unix, keepBody: r.Body, body: &body})
		if err != nil {
			o.Outcome, o.Error = OutcomeError, err.Error()
			break
		}
		o.Outcome, o.Status, o.Error, o.LatencyMS = res.Outcome, res.Status, res.Error, res.LatencyMS
		if r.Body && json.Valid(body) {
			o.Body = body
		}
		return o
	case KindTCP:
		o.Outcome, o.Error = dialAs(ctx, "tcp", r.Addr, timeout, r.As)
	case KindUnix:
		o.Outcome, o.Error = dialAs(ctx, "unix", r.Addr, timeout, r.As)
	case KindFile:
		o.Outcome, o.Error, o.File = ProbeFile(r.Path, r.As)
	case KindInterfaces:
		ifs, err := Interfaces("/sys/class/net")
		if err != nil {
			o.Outcome, o.Error = OutcomeError, err.Error()
			break
		}
		o.Outcome, o.Interfaces = OutcomeFound, ifs
	case KindEpisode:
		iso, err := EpisodeIsolation(ctx, r.Listen, timeout)
		if err != nil {
			o.Outcome, o.Error = OutcomeError, err.Error()
			break
		}
		o.Outcome, o.Isolation = OutcomeFound, &iso
	case KindUIDBlock:
		base, count, err := FindUIDBlock(r.Listen)
		if err != nil {
			o.Outcome, o.Error = OutcomeNotFound, err.Error()
			break
		}
		o.Outcome, o.UIDBase, o.UIDCount = OutcomeFound, base, count
	case KindSocket:
		o.Sockets = FindSockets(ctx, getenv)
		o.Outcome = OutcomeNone
		if slices.ContainsFunc(o.Sockets, func(s Socket) bool { return s.IsSocket }) {
			o.Outcome = OutcomeVisible
		}
	case KindProcess:
		p, err := FindProcess(r.Listen)
		if err != nil {
			o.Outcome, o.Error = OutcomeNotFound, err.Error()
			break
		}
		o.Outcome, o.Process = OutcomeFound, &p
	}
	o.LatencyMS = ms(time.Since(start))
	return o
}

func validEnvName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
