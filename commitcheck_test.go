package agentpen_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommitCheck runs scripts/commit-check.sh on a repository made
// here: it names every message after the base that breaks the form (a
// long subject, no blank second line, a long body line, a merge), and
// none that keeps it (an indented or single-word long line, a commit
// before the base); a clone without the history is skipped, and fails
// when CI=true.
func TestCommitCheck(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required")
	}
	script, err := filepath.Abs("scripts/commit-check.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	commit := func(msg string) string {
		t.Helper()
		git("commit", "-q", "--allow-empty", "--cleanup=verbatim", "-m", msg)
		return git("rev-parse", "--short", "HEAD")
	}
	long := strings.Repeat("word ", 15) // 75 characters
	git("init", "-q", "-b", "main")
	before := commit("an old essay of a subject that runs on for far longer than seventy-two characters")
	base := commit("base: the first commit in the form")
	good := commit("pkg: a good one\n\nThe why, wrapped.\n    " + long + "\nhttps://example.invalid/" + strings.Repeat("x", 80) + "\n")
	longSubject := commit("pkg: " + long)
	noBlank := commit("pkg: no blank line\nthe body starts at once")
	longBody := commit("pkg: a long body line\n\n" + long + "\n")
	git("checkout", "-q", "-b", "side", base)
	side := commit("side: a commit on a branch")
	git("checkout", "-q", "main")
	git("merge", "-q", "--no-ff", "-m", "Merge the side branch, with a subject that is far too long to be read in one line", "side")
	merge := git("rev-parse", "--short", "HEAD")

	run := func(dir string, env []string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command("bash", append([]string{script}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CI=")
		cmd.Env = append(cmd.Env, env...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	out, code := run(dir, nil, "--base", base)
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	named := func(c string) bool { return strings.HasPrefix(out, c+" ") || strings.Contains(out, "\n"+c+" ") }
	for _, c := range []string{longSubject, noBlank, longBody, merge} {
		if !named(c) {
			t.Errorf("%s breaks the form but is not named:\n%s", c, out)
		}
	}
	for _, c := range []string{before, base, good, side} {
		if named(c) {
			t.Errorf("%s is named, but it keeps the form or comes before the base:\n%s", c, out)
		}
	}
	for _, want := range []string{"the subject is 80 characters", "line 2 is not blank", "line 3 is 75 characters", "4 of 7 commit messages"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if out, code := run(dir, nil, "--base", base, good); code != 0 || !strings.Contains(out, "2 commit messages since") {
		t.Errorf("up to the good commit: exit %d, want 0 with 2 checked:\n%s", code, out)
	}

	// No history: skipped on a developer's machine, a failure in CI.
	shallow := filepath.Join(t.TempDir(), "shallow")
	git("clone", "-q", "--depth", "1", "file://"+dir, shallow)
	for _, where := range []string{shallow, t.TempDir()} {
		if out, code := run(where, nil, "--base", base); code != 0 || !strings.Contains(out, "skipped") {
			t.Errorf("%s without CI: exit %d, want 0 saying skipped:\n%s", where, code, out)
		}
		if out, code := run(where, []string{"CI=true"}, "--base", base); code != 1 || !strings.Contains(out, "cannot be checked") {
			t.Errorf("%s with CI=true: exit %d, want 1 saying it cannot check:\n%s", where, code, out)
		}
	}
	if _, code := run(dir, nil, "--frobnicate"); code != 2 {
		t.Errorf("a bad flag: exit %d, want 2", code)
	}
}
