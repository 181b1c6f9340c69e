package adapter

import "testing"

func TestIsRunDir(t *testing.T) {
	a := &Adapter{Docker: &Docker{host: Host{SocketPath: "/run/user/1001/docker.sock"}}}
	tests := []struct {
		path string
		want bool
	}{
		{"/run/user/1001/agentpen/c-0123456789/agent-0123456789abcdef01234567", true},
		{"/run/user/1001/agentpen/c-0123456789", false},
		{"/run/user/1001/agentpen/c/agent-0123456789abcdef0123456", false},
		{"/run/user/1001/agentpen/../agentpen/agent-0123456789abcdef01234567", false},
		{"/run/user/1001/agentpen/c/../agent-0123456789abcdef01234567", false},
		{"/etc", false},
		{"/", false},
		{"", false},
		{"run/user/1001/agentpen/c/agent-0123456789abcdef01234567", false},
		{"/run/user/1002/agentpen/c/agent-0123456789abcdef01234567", false},
		{"/run/user/1001/agentpen/c/agent-0123456789abcdef01234567/", false},
	}
	for _, tt := range tests {
		if got := a.isRunDir(tt.path); got != tt.want {
			t.Errorf("isRunDir(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
}
