package agentpen_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// The examples of README.md and docs/*.md are a runnable set. Every
// ```sh, ```bash and ```python block carries a mark on the line before
// it (an HTML comment, invisible once rendered):
//
//	<!-- example: SESSION -->        run it, in the named session
//	<!-- example: skip: REASON -->   do not run it, for REASON
//
// The sessions of a document run one after the other, in the order their
// first blocks come, in one working directory and one state root (files
// carry over: the spec one writes, another posts). A session is one bash
// (variables and background jobs last from one of its blocks to the
// next), in a network namespace of its own with its own loopback (so a
// service listens on 127.0.0.1:8700 as the examples say, whatever else
// this machine runs), under set -euo pipefail: every command must
// succeed, and curl fails on an error answer (the session's curl is a
// function that adds --fail-with-body). A python block runs with the session's python3 (a
// venv it activated, say). What the examples say is run as they say it,
// but for three substitutions, so that runs on one daemon do not meet:
// the campaign ids run-N get a suffix of the run's, the workbench image
// is the one make test built (WORKBENCH_IMAGE), and agentpen's bin/ is
// first on PATH (the examples name bin/agentpen, or agentpen installed).
// When a session ends, every process it started is stopped; when a
// document's sessions end, every campaign of its state root is taken down
// (verified) and nothing of them may remain on the daemon.

// example is one fenced block of a document.
type example struct {
	file    string
	line    int    // the opening fence's
	lang    string // sh, bash, python
	session string // "" when skipped
	skip    string // why it is not run
	text    string
}

var (
	exampleMark  = regexp.MustCompile(`^<!-- example: (?:skip: (\S.*\S)|([a-z0-9][a-z0-9-]*)) -->$`)
	exampleFence = regexp.MustCompile("^```([a-z]*)$")
)

// exampleLangs are the languages of the blocks that are examples.
var exampleLangs = map[string]bool{"sh": true, "bash": true, "python": true}

// parseExamples reads a document's example blocks, and fails on a block
// without a mark, a mark with no block after it, or a malformed mark.
func parseExamples(file, text string) ([]example, error) {
	lines := strings.Split(text, "\n")
	var out []example
	var errs []string
	pending := -1 // the line of a mark waiting for its block
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "<!-- example") {
			if pending >= 0 {
				errs = append(errs, fmt.Sprintf("%s:%d: a mark with no example block after it", file, pending+1))
			}
			if !exampleMark.MatchString(l) {
				errs = append(errs, fmt.Sprintf("%s:%d: %q: want <!-- example: SESSION --> or <!-- example: skip: REASON -->", file, i+1, l))
				pending = -1
				continue
			}
			pending = i
			continue
		}
		m := exampleFence.FindStringSubmatch(l)
		if m == nil {
			if strings.TrimSpace(l) != "" && pending >= 0 {
				errs = append(errs, fmt.Sprintf("%s:%d: a mark with no example block after it", file, pending+1))
				pending = -1
			}
			continue
		}
		// A fenced block: find its end.
		end := i + 1
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		if exampleLangs[m[1]] {
			ex := example{file: file, line: i + 1, lang: m[1], text: strings.Join(lines[i+1:min(end, len(lines))], "\n") + "\n"}
			if pending < 0 {
				errs = append(errs, fmt.Sprintf("%s:%d: a ```%s block without a mark (<!-- example: SESSION --> or <!-- example: skip: REASON --> on the line before)", file, i+1, m[1]))
			} else {
				mm := exampleMark.FindStringSubmatch(lines[pending])
				ex.skip, ex.session = mm[1], mm[2]
				out = append(out, ex)
			}
		} else if pending >= 0 {
			errs = append(errs, fmt.Sprintf("%s:%d: a mark before a ```%s block, which is not an example", file, pending+1, m[1]))
		}
		pending = -1
		i = end
	}
	if pending >= 0 {
		errs = append(errs, fmt.Sprintf("%s:%d: a mark with no example block after it", file, pending+1))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return out, nil
}

// exampleDocs are the documents whose examples are the set: README.md and
// docs/*.md.
func exampleDocs(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, docs...)
}

// TestExampleMarks: every example of README.md and docs/ is marked, to
// run (in a session) or skipped with a reason; most of them run.
func TestExampleMarks(t *testing.T) {
	run, skipped := 0, 0
	for _, doc := range exampleDocs(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		exs, err := parseExamples(doc, string(b))
		if err != nil {
			t.Error(err)
			continue
		}
		for _, ex := range exs {
			if ex.skip != "" {
				skipped++
				t.Logf("%s:%d skipped: %s", ex.file, ex.line, ex.skip)
			} else {
				run++
			}
		}
	}
	if run < 2*skipped {
		t.Errorf("%d examples run, %d are skipped: the set is mostly skipped", run, skipped)
	}
}

// TestExampleMarksFail: the parser refuses each way a document can get
// its marks wrong.
func TestExampleMarksFail(t *testing.T) {
	ok := "# t\n\n<!-- example: one -->\n```sh\necho a\n```\n\n<!-- example: skip: needs a GPU -->\n```python\nprint(1)\n```\n\n```json\n{}\n```\n"
	exs, err := parseExamples("ok.md", ok)
	if err != nil || len(exs) != 2 || exs[0].session != "one" || exs[0].text != "echo a\n" || exs[1].skip != "needs a GPU" {
		t.Fatalf("the good document: %+v %v", exs, err)
	}
	for name, doc := range map[string]string{
		"unmarked":         "```sh\necho a\n```\n",
		"unmarked_python":  "text\n\n```python\nprint(1)\n```\n",
		"mark_then_prose":  "<!-- example: one -->\nsome prose\n```sh\necho a\n```\n",
		"skip_no_reason":   "<!-- example: skip: -->\n```sh\necho a\n```\n",
		"bad_session_name": "<!-- example: One Two -->\n```sh\necho a\n```\n",
		"mark_before_json": "<!-- example: one -->\n```json\n{}\n```\n",
		"mark_at_the_end":  "```json\n{}\n```\n<!-- example: one -->\n",
	} {
		if _, err := parseExamples(name+".md", doc); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// exampleSession is one session of a document: its blocks, in order.
type exampleSession struct {
	name   string
	blocks []example
}

// sessionsOf groups a document's runnable examples by session, in the
// order of their first blocks.
func sessionsOf(exs []example) []exampleSession {
	var out []exampleSession
	at := map[string]int{}
	for _, ex := range exs {
		if ex.skip != "" {
			continue
		}
		i, ok := at[ex.session]
		if !ok {
			i = len(out)
			at[ex.session] = i
			out = append(out, exampleSession{name: ex.session})
		}
		out[i].blocks = append(out[i].blocks, ex)
	}
	return out
}

var campaignIDs = regexp.MustCompile(`\brun-(\d+)\b`)

// TestExamples runs the marked examples of README.md and docs/, each
// session as the comment at the top of this file says, in a copy of a
// fresh checkout (bin/ built from this tree) against agentpen serve and
// the real rootless daemon, and fails naming the first block of a
// session that did not succeed, with what it printed.
func TestExamples(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireDocker(t)
	for _, tool := range []string{"bash", "curl", "openssl", "python3", "unshare", "ip", "docker"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to run the examples: %v", tool, err)
		}
	}
	checkout := freshCheckout(t, t.TempDir())
	suffix := randomHex(t, 3)
	image := testenv.WorkbenchImage()
	for _, doc := range exampleDocs(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		exs, err := parseExamples(doc, string(b))
		if err != nil {
			t.Fatal(err)
		}
		sessions := sessionsOf(exs)
		if len(sessions) == 0 {
			continue
		}
		t.Run(strings.TrimSuffix(filepath.Base(doc), ".md"), func(t *testing.T) {
			work := t.TempDir()
			for _, name := range []string{"bin", "scripts", "testdata", "clients"} {
				if err := os.Symlink(filepath.Join(checkout, name), filepath.Join(work, name)); err != nil {
					t.Fatal(err)
				}
			}
			env := []string{"XDG_STATE_HOME=" + filepath.Join(work, "state"), "PYTHONDONTWRITEBYTECODE=1",
				"PATH=" + filepath.Join(checkout, "bin") + ":" + os.Getenv("PATH")}
			for _, kv := range os.Environ() {
				k, _, _ := strings.Cut(kv, "=")
				if !strings.HasPrefix(k, "AGENTPEN_") && k != "DOCKER_HOST" && k != "PATH" && k != "XDG_STATE_HOME" {
					env = append(env, kv)
				}
			}
			t.Cleanup(func() { downAll(t, checkout, append(env, "DOCKER_HOST="+os.Getenv("DOCKER_HOST"))) })
			for _, s := range sessions {
				for i := range s.blocks {
					s.blocks[i].text = campaignIDs.ReplaceAllString(strings.ReplaceAll(s.blocks[i].text, "agentpen/workbench:dev", image), "run-${1}-"+suffix)
				}
				if !t.Run(s.name, func(t *testing.T) { runSession(t, work, env, s) }) {
					return // the next sessions build on this one
				}
			}
		})
	}
}

// runSession runs a session's blocks in one bash in a network namespace
// of its own, then stops every process it started.
func runSession(t *testing.T, work string, env []string, s exampleSession) {
	scripts := t.TempDir()
	var sh strings.Builder
	// The examples' curl fails on an error answer (the session's own
	// function: the scripts they run keep their curl).
	sh.WriteString("set -euo pipefail\ncurl() { command curl --fail-with-body --show-error \"$@\"; }\n")
	for i, b := range s.blocks {
		fmt.Fprintf(&sh, "echo '@@block %d'\n", i)
		switch b.lang {
		case "python":
			py := filepath.Join(scripts, fmt.Sprintf("block-%d.py", i))
			if err := os.WriteFile(py, []byte(b.text), 0o600); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&sh, "python3 %s\n", py)
		default:
			sh.WriteString(b.text)
		}
		fmt.Fprintf(&sh, "echo '@@ok %d'\n", i)
	}
	script := filepath.Join(scripts, "session.sh")
	if err := os.WriteFile(script, []byte(sh.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	mark := "AGENTPEN_EXAMPLES_MARK=" + randomHex(t, 8)
	cmd := exec.CommandContext(testenv.Context(t), "unshare", "--net", "--", "bash", "-c", "ip link set lo up && exec bash --noprofile --norc "+script)
	cmd.Dir, cmd.Env = work, append(append([]string{}, env...), mark)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A file, not a pipe: a background job holding the output must not
	// keep Wait from returning.
	outFile, err := os.Create(filepath.Join(scripts, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	cmd.Stdout, cmd.Stderr = outFile, outFile
	start := time.Now()
	runErr := cmd.Run()
	stopMarked(t, mark)
	out, err := os.ReadFile(outFile.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("session %s: %d blocks in %v", s.name, len(s.blocks), time.Since(start).Round(time.Millisecond))
	if testing.Verbose() {
		t.Logf("session %s printed:\n%s", s.name, out)
	}
	outputs, ok := splitBlocks(string(out), len(s.blocks))
	for i, b := range s.blocks {
		if !ok[i] {
			t.Fatalf("%s:%d (session %s, block %d) did not succeed (%v):\n%s\n--- it printed:\n%s", b.file, b.line, s.name, i, runErr, b.text, outputs[i])
		}
	}
	if runErr != nil {
		t.Fatalf("session %s: %v\n%s", s.name, runErr, out)
	}
}

// splitBlocks cuts a session's output at its blocks' marks: each block's
// output, and whether it got to its end.
func splitBlocks(out string, n int) ([]string, []bool) {
	outputs, ok := make([]string, n), make([]bool, n)
	cur := -1
	for _, line := range strings.SplitAfter(out, "\n") {
		switch {
		case strings.HasPrefix(line, "@@block "):
			cur, _ = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "@@block ")))
		case strings.HasPrefix(line, "@@ok "):
			i, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "@@ok ")))
			if i >= 0 && i < n {
				ok[i] = true
			}
		case cur >= 0 && cur < n:
			outputs[cur] += line
		}
	}
	return outputs, ok
}

// stopMarked stops the processes whose environment holds mark (a
// session's background jobs: a service, a stream): SIGTERM, and SIGKILL
// to those still there after a grace.
func stopMarked(t *testing.T, mark string) {
	t.Helper()
	for _, pid := range markedProcesses(t, mark) {
		syscall.Kill(pid, syscall.SIGTERM)
	}
	for wait := 0; wait < 300 && len(markedProcesses(t, mark)) > 0; wait++ {
		time.Sleep(100 * time.Millisecond)
	}
	for _, pid := range markedProcesses(t, mark) {
		t.Logf("process %d (%s) ignored SIGTERM: killed", pid, cmdline(pid))
		syscall.Kill(pid, syscall.SIGKILL)
	}
}
