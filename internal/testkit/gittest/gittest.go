// Package gittest runs git for the tests' repositories: in a directory
// of the test's, with no user or system configuration, a fixed identity
// and date (the same content makes the same object ids) and hooks off.
package gittest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Run runs git with args in dir and returns its output, trimmed; it
// fails t when git does.
func Run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return RunInput(t, dir, "", args...)
}

// RunInput is Run with stdin given to git ("" for none).
func RunInput(t testing.TB, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "core.hooksPath=/dev/null"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.invalid",
		"GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.invalid", "GIT_AUTHOR_DATE=1700000000 +0000",
		"GIT_COMMITTER_DATE=1700000000 +0000", "PATH=" + os.Getenv("PATH")}
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
