package agentpen_test

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite docs/newcomer.md from this run")

// newcomerFile is the transcript the test keeps true.
const newcomerFile = "docs/newcomer.md"

// newcomerSteps are what a newcomer types, in one shell, from a fresh
// checkout where make images ran (the rootless daemon is up, bin/ built):
// each with the sentence docs/newcomer.md says before it.
var newcomerSteps = []struct{ say, cmd string }{
	{"Find the rootless daemon (`make images` started it) and point `DOCKER_HOST` at it:",
		`eval "$(scripts/rootless-docker.sh)"`},
	{"Check the set-up: the daemon must be rootless; the two local images must exist.",
		`bin/agentpen doctor`},
	{"Make the API key the grader checks (at least 24 characters; agentpen refuses placeholders):",
		`export AGENTPEN_API_KEY=$(openssl rand -hex 32)`},
	{"Write a campaign spec: a grader and two workspaces, pinned to the local image's id (agentpen never pulls).",
		`img=$(docker image inspect --format '{{.Id}}' agentpen/workbench:dev)
id=newcomer-$(date +%s)
cat > spec.json <<EOF
{"campaign_id": "$id", "server": {"image": "$img"},
 "workspaces": [{"task_id": "software/median@7", "image": "$img"},
                {"task_id": "sql/top_customer@3", "image": "$img"}]}
EOF`},
	{"Bring it up. Progress and a summary go to stderr (on a terminal the progress is one line rewritten in place); the campaign's ids go to stdout as JSON.",
		`bin/agentpen up spec.json > up.json`},
	{"Each workspace's episode server listens on a unix socket on the host; take the first one's:",
		`sock=$(python3 -c 'import json; print(json.load(open("up.json"))["workspaces"][0]["socket"])')`},
	{"Write an episode for `workbench client`: one command per line (its oracle fixes `solution.py`).",
		`python3 - > play.txt <<'EOF'
import json
fix = open("testdata/oracles/software/median.py").read()
print("reset software/median@7")
print('step read_file {"path": "solution.py"}')
print("step write_file " + json.dumps({"path": "solution.py", "content": fix}))
print("step run_tests")
print('step submit {"answer": "even-length lists: the mean of the two middle values"}')
EOF`},
	{"Play it through the socket. From a pipe the client echoes each command and stops at the first server error; on a terminal it prompts (`help` lists the commands).",
		`bin/workbench client "$sock" < play.txt`},
	{"Prove again what the campaign is (`up` already attested it and fails closed when it does not):",
		`bin/agentpen attest "$id"`},
	{"Take it down: everything is removed by the ids its journal recorded, then verified gone.",
		`bin/agentpen down "$id"`},
	{"Nothing is left:",
		`bin/agentpen ls`},
}

// TestNewcomerTranscript runs newcomerSteps in one bash, in a copy of a
// fresh checkout (bin/ built from this tree; scripts and testdata linked),
// against the real rootless daemon, and fails unless every step exits 0
// and the normalised transcript equals docs/newcomer.md (rewrite it with
// go test . -run TestNewcomerTranscript -update).
func TestNewcomerTranscript(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireDocker(t)
	for _, tool := range []string{"bash", "openssl", "python3", "docker"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to replay the newcomer transcript: %v", tool, err)
		}
	}
	tmp := t.TempDir()
	checkout := freshCheckout(t, tmp)
	state := filepath.Join(tmp, "state")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	image := testenv.WorkbenchImage()
	env := append(os.Environ(), "XDG_STATE_HOME="+state, "AGENTPEN_API_KEY=")
	// Whatever happens, nothing of the campaign outlives the test.
	t.Cleanup(func() { downAll(t, checkout, env) })

	var script strings.Builder
	for i, s := range newcomerSteps {
		cmd := strings.ReplaceAll(s.cmd, "agentpen/workbench:dev", image)
		fmt.Fprintf(&script, "echo '@@step %d'\n{ %s\n} 2>&1\necho \"@@rc $?\"\n", i, cmd)
	}
	sh := exec.CommandContext(testenv.Context(t), "bash", "-c", script.String())
	sh.Dir, sh.Env = checkout, env
	out, err := sh.CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	outputs, codes := splitSteps(t, string(out))
	var doc strings.Builder
	doc.WriteString(newcomerHeader)
	for i, s := range newcomerSteps {
		if codes[i] != 0 {
			t.Errorf("step %d exited %d: %s\n%s", i, codes[i], s.cmd, outputs[i])
		}
		o := normalise(outputs[i], checkout, state, image)
		fmt.Fprintf(&doc, "%s\n\n```console\n$ %s\n%s```\n\n", s.say, strings.ReplaceAll(s.cmd, "\n", "\n> "), o)
	}
	got := strings.TrimRight(doc.String(), "\n") + "\n"
	if *update && t.Failed() {
		t.Fatalf("%s not rewritten: a step failed", newcomerFile)
	}
	if *update {
		if err := os.WriteFile(newcomerFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(newcomerFile)
	if err != nil {
		t.Fatalf("%v (write it with go test . -run TestNewcomerTranscript -update)", err)
	}
	if machine(string(want)) != machine(got) {
		t.Errorf("%s is stale; regenerate it with go test . -run TestNewcomerTranscript -update, and read the diff (-committed +now):\n%s", newcomerFile, cmp.Diff(strings.Split(string(want), "\n"), strings.Split(got, "\n")))
	}
}

const newcomerHeader = `# A newcomer's first campaign

What a newcomer types, and what they see, from a fresh checkout on Debian 12 as root, once
` + "`scripts/deps.sh && make images`" + ` has run (it starts the rootless daemon and builds ` + "`bin/`" + `): bring
a campaign up, play one episode by hand through a workspace's socket, attest the campaign and
take it down.

This file is generated: ` + "`make test`" + ` runs the commands in one shell against the real daemon
(` + "`TestNewcomerTranscript`" + ` in ` + "`newcomer_test.go`" + `) and fails when what they print no longer
matches it, so it cannot go stale. Regenerate it with
` + "`go test . -run TestNewcomerTranscript -update`" + `. Values that change from run to run are
normalised: ids, hashes and nonces (` + "`<id>`" + `, ` + "`<hash>`" + `, ...), times, the host's name, the uid and
paths of the run (the checkout is ` + "`~/agentpen`" + `, the state root ` + "`~/.local/state`" + `); lines of steps
that run concurrently are sorted; ` + "`doctor`" + ` lists only the two images the campaign needs. What
` + "`doctor`" + ` says of the daemon's version, root directory, cgroups and limits is the machine's that
wrote this file (Debian 12, rootless on cgroup v1); the test compares only that those lines are
there.

`

// splitSteps cuts the shell's output at the step markers.
func splitSteps(t *testing.T, out string) (outputs []string, codes []int) {
	t.Helper()
	outputs = make([]string, len(newcomerSteps))
	codes = make([]int, len(newcomerSteps))
	for i := range codes {
		codes[i] = -1
	}
	cur := -1
	for _, line := range strings.SplitAfter(out, "\n") {
		switch {
		case strings.HasPrefix(line, "@@step "):
			cur, _ = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "@@step ")))
		case strings.HasPrefix(line, "@@rc "):
			codes[cur], _ = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "@@rc ")))
		case cur >= 0:
			outputs[cur] += line
		}
	}
	return outputs, codes
}

// normalise replaces what changes between runs and machines, and sorts
// each run of progress lines (their steps run concurrently).
func normalise(s, checkout, state, image string) string {
	var out, run []string
	flush := func() {
		slices.Sort(run)
		out = append(out, run...)
		run = nil
	}
	for _, line := range strings.SplitAfter(s, "\n") {
		if imageLine.MatchString(line) && !requiredImage.MatchString(line) {
			continue
		}
		line = strings.ReplaceAll(line, checkout, "~/agentpen")
		line = strings.ReplaceAll(line, state, "~/.local/state")
		line = strings.ReplaceAll(line, image, "agentpen/workbench:dev")
		for _, r := range normalisers {
			line = r.re.ReplaceAllString(line, r.with)
		}
		if line == "" {
			continue
		}
		if progressLine.MatchString(line) {
			run = append(run, line)
			continue
		}
		flush()
		out = append(out, line)
	}
	flush()
	return strings.Join(out, "")
}

// machine masks what doctor reports of the daemon's machine (its
// version, root directory, cgroups and limits), which differs from one
// host to the next while the rest of the transcript does not.
func machine(s string) string {
	return machineLine.ReplaceAllString(s, "$1 <this machine's>")
}

var (
	machineLine   = regexp.MustCompile(`(?m)^(server version|root dir|cgroups|memory limits|pids limits|rootless) .*$`)
	progressLine  = regexp.MustCompile(`^(created|ready|removed) \d+/\d+ `)
	imageLine     = regexp.MustCompile(`^image +agentpen/`)
	requiredImage = regexp.MustCompile(`^image +agentpen/(python-base:bookworm|workbench:dev) `)
)

var normalisers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`newcomer-\d+`), "newcomer-<time>"},
	{regexp.MustCompile(`sha256:[0-9a-f]{64}`), "sha256:<id>"},
	{regexp.MustCompile(`agent-[0-9a-f]{24}`), "agent-<id>"},
	{regexp.MustCompile(`/i-[0-9a-f]{16}/`), "/i-<instance>/"},
	{regexp.MustCompile(`(newcomer-<time>)-[0-9a-f]{10}\b`), "$1-<hash>"},
	{regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`), "<uuid>"},
	{regexp.MustCompile(`\b[0-9a-f]{12}\b`), "<id>"},
	{regexp.MustCompile(`/run/user/\d+/`), "/run/user/<uid>/"},
	{regexp.MustCompile(`\(uid \d+\)`), "(uid <uid>)"},
	{regexp.MustCompile(`(?m)^daemon( +)\S+ \(ID [A-Z0-9:]+\)`), "daemon$1<host> (ID <daemon id>)"},
	{regexp.MustCompile(`\bin \d+(\.\d+)?(ns|µs|ms|s|m[0-9.]*s)\b`), "in <time>"},
	{regexp.MustCompile(`\d+(\.\d+)? ?(ms|s) ?(elapsed|\))`), "<time>$3"},
}

// downAll takes down every campaign in the test's state root.
func downAll(t *testing.T, checkout string, env []string) {
	ls := exec.Command(filepath.Join(checkout, "bin", "agentpen"), "ls", "--json")
	ls.Env = env
	out, err := ls.Output()
	if err != nil {
		return
	}
	for _, m := range regexp.MustCompile(`"campaign_id": "([^"]+)"`).FindAllStringSubmatch(string(out), -1) {
		down := exec.Command(filepath.Join(checkout, "bin", "agentpen"), "down", m[1])
		down.Env = env
		if b, err := down.CombinedOutput(); err != nil {
			t.Errorf("down %s: %v\n%s", m[1], err, b)
		}
	}
}
