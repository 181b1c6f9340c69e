package docker

import (
	"errors"
	"strings"
	"testing"
)

var hostTests = []struct {
	name        string
	value       string
	allowCustom bool
	wantURL     string
	wantErr     error
}{
	{"rootless_url", "unix:///run/user/1000/docker.sock", false, "unix:///run/user/1000/docker.sock", nil},
	{"rootless_bare_path", "/run/user/1001/docker.sock", false, "unix:///run/user/1001/docker.sock", nil},
	{"rootless_named", "unix:///run/user/7/docker-rootless-ci.sock", false, "unix:///run/user/7/docker-rootless-ci.sock", nil},
	{"rootless_suffix", "unix:///run/user/7/docker-a_b.c.sock", false, "unix:///run/user/7/docker-a_b.c.sock", nil},
	{"rootless_component", "unix:///srv/rootless/d.sock", false, "unix:///srv/rootless/d.sock", nil},
	{"scheme_case", "UNIX:///run/user/1/docker.sock", false, "unix:///run/user/1/docker.sock", nil},
	{"single_slash_form", "unix:/run/user/1/docker.sock", false, "unix:///run/user/1/docker.sock", nil},
	{"custom_allowed", "unix:///tmp/agentpen/d.sock", true, "unix:///tmp/agentpen/d.sock", nil},

	{"unset", "", false, "", ErrHostUnset},
	{"tcp", "tcp://127.0.0.1:2375", false, "", ErrHostNotUnix},
	{"tcp_tls", "tcp://docker.example:2376", true, "", ErrHostNotUnix},
	{"ssh", "ssh://user@host", true, "", ErrHostNotUnix},
	{"npipe", "npipe:////./pipe/docker_engine", true, "", ErrHostNotUnix},
	{"fd", "fd://", true, "", ErrHostNotUnix},
	{"http", "http://localhost/run/user/1/docker.sock", true, "", ErrHostNotUnix},
	{"no_scheme_relative", "run/user/1/docker.sock", true, "", ErrHostNotUnix},
	{"unix_with_host", "unix://host/run/user/1/docker.sock", true, "", ErrHostNotUnix},
	{"unix_with_fragment", "unix:///run/user/1/docker.sock#x", true, "", ErrHostUnsafe},
	{"bare_with_hash", "/000#", true, "", ErrHostUnsafe},
	{"percent_escape", "unix:///run/user/1/docker%2esock", true, "", ErrHostUnsafe},
	{"unix_relative", "unix:run/user/1/docker.sock", true, "", ErrHostUnsafe},
	{"rootful_var_run", "unix:///var/run/docker.sock", true, "", ErrHostRootful},
	{"rootful_run", "/run/docker.sock", true, "", ErrHostRootful},
	{"rootful_root", "unix:///docker.sock", true, "", ErrHostRootful},
	{"rootful_double_slash", "unix:////var/run/docker.sock", true, "", ErrHostUnsafe},
	{"rootful_dot", "/var/run/./docker.sock", true, "", ErrHostUnsafe},
	{"rootful_dotdot", "/run/user/1/../../var/run/docker.sock", true, "", ErrHostUnsafe},
	{"trailing_slash", "/run/user/1/docker.sock/", true, "", ErrHostUnsafe},
	{"root_only", "unix:///", true, "", ErrHostUnsafe},
	{"wildcard_star", "unix:///run/user/*/docker.sock", true, "", ErrHostUnsafe},
	{"wildcard_question", "unix:///run/user/1/docker?.sock", true, "", ErrHostUnsafe},
	{"wildcard_bracket", "unix:///run/user/[1]/docker.sock", true, "", ErrHostUnsafe},
	{"nul", "unix:///run/user/1/docker.sock\x00", true, "", ErrHostUnsafe},
	{"space", "unix:///run/user/1/docker .sock", true, "", ErrHostUnsafe},
	{"newline", "unix:///run/user/1/docker.sock\n", true, "", ErrHostUnsafe},
	{"tab", "\tunix:///run/user/1/docker.sock", true, "", ErrHostUnsafe},
	{"nbsp", "unix:///run/user/1/docker\u00a0.sock", true, "", ErrHostUnsafe},
	{"bad_utf8", "unix:///run/user/1/docker\xff.sock", true, "", ErrHostUnsafe},
	{"too_long", "unix:///run/user/1/" + strings.Repeat("a", maxHostLen) + ".sock", true, "", ErrHostUnsafe},
	{"custom_refused", "unix:///tmp/agentpen/d.sock", false, "", ErrHostNotRootless},
	{"user_not_numeric", "unix:///run/user/bob/docker.sock", false, "", ErrHostNotRootless},
	{"wrong_name", "unix:///run/user/1/containerd.sock", false, "", ErrHostNotRootless},
	{"rootless_word_only", "unix:///srv/rootless-docker.sock", false, "", ErrHostNotRootless},
	{"nested_run_user", "unix:///home/x/run/user/1/docker.sock", false, "", ErrHostNotRootless},
}

func TestResolveHost(t *testing.T) {
	for _, tt := range hostTests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ResolveHost(tt.value, tt.allowCustom)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ResolveHost(%q) = %+v, %v; want error %v", tt.value, h, err, tt.wantErr)
				}
				var he *HostError
				if !errors.As(err, &he) {
					t.Fatalf("error %T is not a *HostError", err)
				}
				if h != (Host{}) {
					t.Fatalf("a refused value returned a Host: %+v", h)
				}
				return
			}
			if err != nil {
				t.Fatalf("ResolveHost(%q): %v", tt.value, err)
			}
			if h.URL != tt.wantURL || "unix://"+h.SocketPath != h.URL {
				t.Fatalf("got %+v, want URL %s", h, tt.wantURL)
			}
		})
	}
}

func TestResolveHostCustomFlag(t *testing.T) {
	h, err := ResolveHost("/tmp/x/docker.sock", true)
	if err != nil || !h.Custom {
		t.Fatalf("custom path: %+v, %v; want Custom", h, err)
	}
	h, err = ResolveHost("/run/user/3/docker.sock", true)
	if err != nil || h.Custom {
		t.Fatalf("recognised path with allowCustom: %+v, %v; want not Custom", h, err)
	}
}

func TestResolveHostErrorNamesValue(t *testing.T) {
	_, err := ResolveHost("unix:///var/run/docker.sock", false)
	if err == nil || !strings.Contains(err.Error(), `"unix:///var/run/docker.sock"`) || !strings.Contains(err.Error(), "rootful") {
		t.Fatalf("error %q should name the value and say rootful", err)
	}
}

func TestHostFromEnv(t *testing.T) {
	env := map[string]string{EnvDockerHost: "unix:///run/user/5/docker.sock"}
	h, err := HostFromEnv(func(k string) string { return env[k] }, false)
	if err != nil || h.SocketPath != "/run/user/5/docker.sock" {
		t.Fatalf("got %+v, %v", h, err)
	}
	if _, err := HostFromEnv(func(string) string { return "" }, false); !errors.Is(err, ErrHostUnset) {
		t.Fatalf("unset: got %v, want ErrHostUnset", err)
	}
}

// FuzzResolveHost checks the properties that matter whatever the input: no
// panic; an accepted value is a clean unix socket path that is never a
// rootful socket, never holds whitespace, wildcards or "..", and resolves to
// itself again.
func FuzzResolveHost(f *testing.F) {
	for _, tt := range hostTests {
		f.Add(tt.value, tt.allowCustom)
	}
	f.Fuzz(func(t *testing.T, value string, allowCustom bool) {
		h, err := ResolveHost(value, allowCustom)
		if err != nil {
			var he *HostError
			if !errors.As(err, &he) {
				t.Fatalf("error %T is not a *HostError", err)
			}
			return
		}
		p := h.SocketPath
		if rootfulSockets[p] || strings.Contains(p, "/var/run/docker.sock") && p == "/var/run/docker.sock" {
			t.Fatalf("accepted rootful %q", value)
		}
		if strings.ContainsAny(p, " \t\n\r\x00*?[") || strings.Contains(p, "..") && strings.Contains("/"+p+"/", "/../") {
			t.Fatalf("accepted unsafe %q -> %q", value, p)
		}
		if !strings.HasPrefix(p, "/") || strings.Contains(p, "//") || strings.HasSuffix(p, "/") {
			t.Fatalf("accepted unclean path %q", p)
		}
		if !allowCustom && h.Custom {
			t.Fatalf("custom path %q accepted without allowCustom", p)
		}
		again, err := ResolveHost(h.URL, allowCustom)
		if err != nil || again != h {
			t.Fatalf("canonical %q does not resolve to itself: %+v, %v", h.URL, again, err)
		}
	})
}
