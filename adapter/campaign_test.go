package adapter

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

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

// ownershipDaemon answers inspect with the given labels and records
// removals, at the SDK's transport.
type ownershipDaemon struct {
	labels  map[string]string
	deletes []string
}

func (f *ownershipDaemon) RoundTrip(req *http.Request) (*http.Response, error) {
	resp := func(status int, body any) (*http.Response, error) {
		b, _ := json.Marshal(body)
		h := http.Header{"Api-Version": {"1.41"}, "Content-Type": {"application/json"}}
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(bytes.NewReader(b)), Request: req}, nil
	}
	p := req.URL.Path
	switch {
	case strings.HasSuffix(p, "/_ping"):
		return resp(200, "OK")
	case strings.HasSuffix(p, "/info"):
		return resp(200, rootlessInfo())
	case req.Method == http.MethodDelete:
		f.deletes = append(f.deletes, p)
		return resp(204, nil)
	case strings.Contains(p, "/containers/") && strings.HasSuffix(p, "/json"):
		return resp(200, map[string]any{"Id": "c1", "Config": map[string]any{"Labels": f.labels}})
	case strings.Contains(p, "/networks/"):
		return resp(200, map[string]any{"Id": "n1", "Labels": f.labels})
	}
	return resp(404, map[string]string{"message": "no such thing"})
}

func TestTearDownRequiresOwnershipLabels(t *testing.T) {
	want := map[string]string{LabelCampaign: "c", LabelOwner: OwnerValue, LabelRole: RoleServer}
	tests := []struct {
		name       string
		labels     map[string]string
		wantDelete bool
	}{
		{"labels_match", map[string]string{LabelCampaign: "c", LabelOwner: OwnerValue, LabelRole: RoleServer, "x": "y"}, true},
		{"other_campaign", map[string]string{LabelCampaign: "d", LabelOwner: OwnerValue, LabelRole: RoleServer}, false},
		{"no_labels", nil, false},
		{"missing_role", map[string]string{LabelCampaign: "c", LabelOwner: OwnerValue}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, _ := ResolveHost("unix:///run/user/1000/docker.sock", false)
			fake := &ownershipDaemon{labels: tt.labels}
			d, err := connect(t.Context(), host, &http.Client{Transport: fake})
			if err != nil {
				t.Fatal(err)
			}
			a := &Adapter{Docker: d, StateRoot: t.TempDir()}
			j, err := OpenJournal(a.CampaignDir("c"))
			if err != nil {
				t.Fatal(err)
			}
			j.Append(Record{Op: OpIntent, Kind: KindContainer, Role: RoleServer, Name: "srv", Labels: want})
			j.Append(Record{Op: OpCreated, Kind: KindContainer, Role: RoleServer, Name: "srv", ID: "c1"})
			j.Close()
			err = a.TearDown(t.Context(), "c")
			if tt.wantDelete {
				if err != nil || len(fake.deletes) != 1 {
					t.Fatalf("err %v, deletes %v; want one delete", err, fake.deletes)
				}
				return
			}
			if !errors.Is(err, ErrNotOwned) || len(fake.deletes) != 0 {
				t.Fatalf("err %v, deletes %v; want ErrNotOwned and nothing deleted", err, fake.deletes)
			}
		})
	}
}
