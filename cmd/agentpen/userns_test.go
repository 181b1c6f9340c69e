package main

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestCheckUserNamespaces: each knob that forbids unprivileged user
// namespaces, and a failed attempt, is refused with what to change; a
// knob the kernel lacks does not apply.
func TestCheckUserNamespaces(t *testing.T) {
	t.Parallel()
	knobs := func(vals map[string]string) func(string) ([]byte, error) {
		return func(p string) ([]byte, error) {
			v, ok := vals[p]
			if !ok {
				return nil, os.ErrNotExist
			}
			return []byte(v + "\n"), nil
		}
	}
	ok := func() error { return nil }
	tests := []struct {
		name  string
		knobs map[string]string
		try   func() error
		want  string // "" passes
	}{
		{"allowed", map[string]string{"/proc/sys/user/max_user_namespaces": "96365", "/proc/sys/kernel/unprivileged_userns_clone": "1"}, ok, ""},
		{"no_knobs", map[string]string{}, ok, ""},
		{"max_zero", map[string]string{"/proc/sys/user/max_user_namespaces": "0"}, ok, "sysctl -w user.max_user_namespaces"},
		{"debian_off", map[string]string{"/proc/sys/kernel/unprivileged_userns_clone": "0"}, ok, "kernel.unprivileged_userns_clone=1"},
		{"apparmor", map[string]string{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1"}, ok, "apparmor_restrict_unprivileged_userns=0"},
		{"attempt_fails", map[string]string{}, func() error { return errors.New("operation not permitted") }, "could not make one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkUserNamespaces(knobs(tt.knobs), tt.try)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (!errors.Is(err, errNoUserNS) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "--sandbox uid-only")):
				t.Fatalf("err %v, want one naming %q and the uid-only sandbox", err, tt.want)
			}
		})
	}
}

// TestUserNamespacesHere: this machine allows them (the tests of the
// workbench's sandbox need them too).
func TestUserNamespacesHere(t *testing.T) {
	if err := checkUserNamespaces(os.ReadFile, tryUserNamespace); err != nil {
		t.Fatal(err)
	}
}
