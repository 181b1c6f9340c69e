package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/workbench/probe"
)

const probeHelp = `Makes one HTTP request and prints one JSON line:
{"url","method","status","ok","error","latency_ms"}. Exits 0 when the
status is expected, 1 when it is not (or there was no reply), 2 on bad
flags. Never uses a proxy and never follows a redirect to another host.
Flags may come before or after URL. A secret header belongs in
--header-env, so its value never appears in the command line (which
other processes can read).

With --batch JSON (and no URL) it runs a batch of probes at once (see
package probe: http, tcp, unix, socket, process, interfaces, uid_block,
episode, file and git probes, each with its own timeout; a git probe
audits the repositories under a path and takes the time it needs) and
prints one JSON line
{"results":[...]} whose outcomes tell a timeout from a refusal; it exits 0 once the batch ran, whatever the
outcomes (the caller judges them), and 2 for a bad batch.

With --batches it reads batches from stdin, one JSON a line, and runs
each as it comes, printing its result line before it reads the next: the
attestation's phases in one process per container, each batch sent when
its phase begins. It exits 0 at the end of stdin, and 2 at a bad batch
(the batches before it answered).`

// errProbeFailed is a probe whose status was not expected; main exits 1.
var errProbeFailed = errors.New("probe failed")

// statusList is --expect-status: comma-separated statuses, repeatable.
type statusList []int

func (s *statusList) String() string {
	parts := make([]string, len(*s))
	for i, v := range *s {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ",")
}

func (s *statusList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 100 || n > 599 {
			return errors.New("want statuses 100..599, comma-separated")
		}
		*s = append(*s, n)
	}
	return nil
}

func runProbe(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet(prog, "probe", "[flags] URL", probeHelp, stdout)
	method := fs.String("method", "GET", "GET, HEAD or POST (a POST has an empty body)")
	var expect statusList
	fs.Var(&expect, "expect-status", "statuses that count as success, comma-separated (default any 2xx)")
	timeout := fs.Duration("timeout", probe.DefaultTimeout, "bound on the whole probe")
	unixSock := fs.String("unix", "", "send the request over this unix socket (the URL's host is then only a name: http://grader/health)")
	var headers, headerEnvs cli.StringList
	fs.Var(&headers, "header", "request header NAME=VALUE, repeatable")
	fs.Var(&headerEnvs, "header-env", "request header NAME=VAR whose value is environment variable VAR, repeatable")
	batch := fs.String("batch", "", "run a JSON batch of probes (see package probe) instead of one URL")
	batches := fs.Bool("batches", false, "run the JSON batches stdin holds, one a line, each answered on its own line as it comes")
	pos, err := fs.Parse(args, 0, 1)
	if err != nil {
		return err
	}
	if *batches {
		if len(pos) != 0 || *batch != "" {
			return cli.Usagef("--batches takes no URL and no --batch")
		}
		return runBatches(ctx, stdin, stdout, getenv)
	}
	if *batch != "" {
		if len(pos) != 0 {
			return cli.Usagef("--batch takes no URL")
		}
		self := digestSelf()
		defer self.get() // its goroutine ended, whatever the batch
		return runBatch(ctx, *batch, self, stdout, getenv)
	}
	if len(pos) != 1 {
		return &cli.UsageError{Msg: "missing URL (or --batch JSON)", Hint: prog + " probe --help"}
	}
	target := pos[0]
	if *timeout <= 0 {
		return cli.Usagef("--timeout %v: must be positive", *timeout)
	}
	h := http.Header{}
	for _, kv := range headers {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return cli.Usagef("--header: want NAME=VALUE")
		}
		h.Add(name, value)
	}
	for _, kv := range headerEnvs {
		name, variable, ok := strings.Cut(kv, "=")
		if !ok || name == "" || !isEnvName(variable) {
			return cli.Usagef("--header-env %q: want NAME=VAR with VAR an environment variable name", kv)
		}
		value := getenv(variable)
		if value == "" {
			return cli.Usagef("--header-env %s: variable %s is unset or empty", name, variable)
		}
		h.Add(name, value)
	}
	res, err := probe.Check(ctx, probe.Config{URL: target, Method: strings.ToUpper(*method), Header: h, Timeout: *timeout, Expect: expect, Unix: *unixSock})
	if err != nil {
		return cli.Usagef("%v", err)
	}
	line, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", line)
	if !res.OK {
		return fmt.Errorf("%w: %s", errProbeFailed, res.Error)
	}
	return nil
}

// maxBatchLine bounds a line of --batches: a batch in argv is at most
// 128 KiB (the kernel's bound on one argument), far more than any
// campaign's.
const maxBatchLine = 4 << 20

// runBatches runs the batches of stdin, one a line, each answered (its
// result line written) before the next is read. The binary is digested
// once, for every batch, while the first is awaited.
func runBatches(ctx context.Context, stdin io.Reader, stdout io.Writer, getenv func(string) string) error {
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 0, 64<<10), maxBatchLine)
	self := digestSelf()
	defer self.get() // its goroutine ended, whatever the batches
	for n := 1; sc.Scan(); n++ {
		if err := runBatch(ctx, sc.Text(), self, stdout, getenv); err != nil {
			return fmt.Errorf("stdin line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return cli.Usagef("--batches: read stdin: %v", err)
	}
	return nil
}

// selfDigest is this binary's identity (selfBinary), digested in the
// background from the moment it is asked for.
type selfDigest struct {
	once sync.Once
	ch   chan probe.Binary
	b    probe.Binary
}

// digestSelf starts digesting this binary.
func digestSelf() *selfDigest {
	d := &selfDigest{ch: make(chan probe.Binary, 1)}
	go func() { d.ch <- selfBinary("/proc/self/exe") }()
	return d
}

// get waits for the digest.
func (d *selfDigest) get() *probe.Binary {
	d.once.Do(func() { d.b = <-d.ch })
	return &d.b
}

// runBatch runs a batch of probes (raw, its JSON) and prints the results,
// naming self as the binary that ran them, on one line. The probes run
// while self is digested.
func runBatch(ctx context.Context, raw string, self *selfDigest, stdout io.Writer, getenv func(string) string) error {
	var b probe.Batch
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return cli.Usagef("--batch: %v", err)
	}
	res, err := probe.RunBatch(ctx, b, getenv)
	if err != nil {
		return cli.Usagef("%v", err)
	}
	res.Binary = self.get()
	line, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", line)
	return err
}

// selfBinary is this workbench's identity for a batch's result: its
// build's version and the digest of its executable, exe (about 10 ms for
// its 18 MB, unloaded).
func selfBinary(exe string) probe.Binary {
	v := cli.ReadVersion()
	b := probe.Binary{Version: v.Version, Commit: v.Commit, Modified: v.Modified}
	f, err := os.Open(exe)
	if err != nil {
		b.Error = err.Error()
		return b
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		b.Error = fmt.Sprintf("read %s: %v", exe, err)
		return b
	}
	b.Digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	return b
}
