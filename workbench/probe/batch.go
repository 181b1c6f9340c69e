package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Validate checks a batch before anything runs.
func Validate(b Batch) error {
	if len(b.Probes) == 0 || len(b.Probes) > MaxBatch {
		return fmt.Errorf("batch: %d probes, want 1..%d: %w", len(b.Probes), MaxBatch, ErrInvalid)
	}
	seen := map[string]bool{}
	for i, r := range b.Probes {
		if r.ID == "" || len(r.ID) > 200 || seen[r.ID] {
			return fmt.Errorf("batch probe %d: id %q empty, too long or repeated: %w", i, r.ID, ErrInvalid)
		}
		seen[r.ID] = true
		if r.As < 0 || r.As > 65535 || r.As > 0 && r.Kind != KindUnix && r.Kind != KindTCP && r.Kind != KindFile && r.Kind != KindGit {
			return fmt.Errorf("batch probe %s: as %d: a uid for a unix, tcp, file or git probe: %w", r.ID, r.As, ErrInvalid)
		}
		if r.AsMain && (r.As != 0 || r.Kind != KindUnix && r.Kind != KindTCP && r.Kind != KindFile && r.Kind != KindGit) {
			return fmt.Errorf("batch probe %s: as_main: for a unix, tcp, file or git probe, without as: %w", r.ID, ErrInvalid)
		}
		if (len(r.Bases) > 0 || len(r.GitKnown) > 0) && r.Kind != KindGit {
			return fmt.Errorf("batch probe %s: bases, git_known: a git probe's: %w", r.ID, ErrInvalid)
		}
		if r.ArgvSuffix < 0 || r.ArgvSuffix > maxArgvSuffix || r.ArgvSuffix > 0 && r.Kind != KindProcess {
			return fmt.Errorf("batch probe %s: argv_suffix %d: a process probe's, at most %d: %w", r.ID, r.ArgvSuffix, maxArgvSuffix, ErrInvalid)
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
		case KindRoute:
			// An address, never a name: resolving one would send a query.
			if _, err := netip.ParseAddrPort(r.Addr); err != nil {
				return fmt.Errorf("batch probe %s: addr %q: want an IP address and port: %w", r.ID, r.Addr, ErrInvalid)
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
		case KindGit:
			if !strings.HasPrefix(r.Path, "/") || filepath.Clean(r.Path) != r.Path {
				return fmt.Errorf("batch probe %s: path %q: want an absolute clean path: %w", r.ID, r.Path, ErrInvalid)
			}
			if len(r.Bases) > maxGitBases || len(r.GitKnown) > maxGitBases {
				return fmt.Errorf("batch probe %s: %d bases, at most %d: %w", r.ID, len(r.Bases), maxGitBases, ErrInvalid)
			}
			for p, base := range r.Bases {
				under := p == r.Path || strings.HasPrefix(p, strings.TrimSuffix(r.Path, "/")+"/")
				if !under || filepath.Clean(p) != p || !isCommitName(base) {
					return fmt.Errorf("batch probe %s: base %q of %q: want 40 hex digits for a clean path under %s: %w", r.ID, base, p, r.Path, ErrInvalid)
				}
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
	if err := Validate(b); err != nil {
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
	if r.AsMain {
		p, err := FindProcess("")
		if err != nil {
			o.Outcome, o.Error = OutcomeError, "the main process's uid: "+err.Error()
			return o
		}
		r.As = p.UID
	}
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
	case KindRoute:
		o.Outcome, o.Error, o.Source = Route(ctx, r.Addr)
	case KindFile:
		o.Outcome, o.Error, o.File = ProbeFile(r.Path, r.As)
	case KindGit:
		o.Outcome, o.Error, o.Git = AuditGit(ctx, r.Path, r.Bases, r.GitKnown, r.As, timeout)
	case KindInterfaces:
		ifs, err := Interfaces("/sys/class/net")
		if err != nil {
			o.Outcome, o.Error = OutcomeError, err.Error()
			break
		}
		o.Outcome, o.Interfaces = OutcomeFound, ifs
	case KindEpisode:
		iso, err := EpisodeIsolation(ctx, r.Listen, r.SelfNS, timeout)
		if err != nil {
			o.Outcome, o.Error = OutcomeError, err.Error()
			break
		}
		o.Outcome, o.Isolation = OutcomeFound, &iso
	case KindUIDBlock:
		base, count, err := FindUIDBlock(r.Listen, r.SelfNS)
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
		if r.ArgvSuffix > 0 {
			p.SuffixDigest = SuffixDigest(p.Pid, r.ArgvSuffix)
		}
		o.Outcome, o.Process = OutcomeFound, &p
	}
	o.LatencyMS = ms(time.Since(start))
	return o
}

// maxArgvSuffix bounds Request.ArgvSuffix.
const maxArgvSuffix = 4096

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

// maxGitBases bounds a git probe's declared bases.
const maxGitBases = 64

// isCommitName reports whether s is 40 lower-case hex digits.
func isCommitName(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
