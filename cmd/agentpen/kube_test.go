package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentpen/agentpen/adapter/kube"
	authv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

// fakeCluster is an API server that answers what kube.Open asks (the
// server's version, the kube-system namespace), and, for doctor, the node
// localhost (Ready unless notReady, holding the agentpen images) and a
// SelfSubjectAccessReview for each permission (allowed unless denied
// names it, as kube.Permission's String). Every other request is
// counted: the cluster a command must not touch.
type fakeCluster struct {
	notReady bool
	denied   map[string]bool
	others   atomic.Int32
}

func (f *fakeCluster) serve(t *testing.T) (kubeconfig string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/version":
			fmt.Fprint(w, `{"major":"1","minor":"37","gitVersion":"v1.37.2"}`)
		case "/api/v1/namespaces/kube-system":
			fmt.Fprint(w, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"kube-system","uid":"6b9c3f0e-0000-4000-8000-000000000001"}}`)
		case "/api/v1/nodes/localhost":
			ready := map[bool]string{true: "False", false: "True"}[f.notReady]
			fmt.Fprintf(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"localhost"},"status":{"conditions":[{"type":"Ready","status":%q}],`+
				`"images":[{"names":["docker.io/agentpen/workbench:dev"]},{"names":["docker.io/agentpen/python-base:bookworm"]}]}}`, ready)
		case "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews":
			// client-go sends it as protobuf; the answer may be JSON.
			body, _ := io.ReadAll(r.Body)
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
			review, ok := obj.(*authv1.SelfSubjectAccessReview)
			if err != nil || !ok || review.Spec.ResourceAttributes == nil {
				http.Error(w, "bad review", http.StatusBadRequest)
				return
			}
			a := review.Spec.ResourceAttributes
			p := kube.Permission{Verb: a.Verb, Group: a.Group, Resource: a.Resource, Subresource: a.Subresource}
			review.Status.Allowed = !f.denied[p.String()]
			json.NewEncoder(w).Encode(review)
		default:
			f.others.Add(1)
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":403}`, http.StatusForbidden)
		}
	}))
	t.Cleanup(srv.Close)
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user: {}\ncurrent-context: c\n", srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// TestDoctorCluster: doctor --kubeconfig says a cluster is usable when a
// node is Ready and every permission custody needs is granted, and
// exits 1 naming what is missing otherwise; it creates nothing.
func TestDoctorCluster(t *testing.T) {
	for _, tt := range []struct {
		name     string
		f        *fakeCluster
		code     int
		want     string
		wantJSON func(doctorReport) bool
	}{
		{name: "usable", f: &fakeCluster{}, code: 0, want: "permissions     all 29 custody needs", wantJSON: func(r doctorReport) bool {
			return r.OK && r.Attestable && r.Cluster.Identity == "k8s-6b9c3f0e-0000-4000-8000-000000000001" && len(r.Cluster.Nodes) == 1 && r.Cluster.Nodes[0].Ready &&
				len(r.MissingImages) == 0 && slices.Contains(slices.Collect(maps.Keys(r.Images)), "docker.io/agentpen/workbench:dev")
		}},
		{name: "denied", f: &fakeCluster{denied: map[string]bool{"patch pods": true, "create pods/exec": true, "delete networkpolicies.networking.k8s.io": true}}, code: 1,
			want: "may not patch pods, delete networkpolicies.networking.k8s.io, create pods/exec"},
		{name: "not_ready", f: &fakeCluster{notReady: true}, code: 1, want: "no node to run pods on is Ready"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kubeconfig := tt.f.serve(t)
			for _, asJSON := range []bool{false, true} {
				args := []string{"doctor", "--kubeconfig", kubeconfig, "--kube-node", "localhost"}
				if asJSON {
					args = append(args, "--json")
				}
				var out, errb bytes.Buffer
				err := run(t.Context(), args, &out, &errb, func(string) string { return "" })
				if exitCode(err) != tt.code {
					t.Fatalf("json %v: exit %d (%v), want %d", asJSON, exitCode(err), err, tt.code)
				}
				if !asJSON && !strings.Contains(out.String()+errb.String(), tt.want) {
					t.Fatalf("output %q, want %q", out.String()+errb.String(), tt.want)
				}
				if asJSON && tt.wantJSON != nil {
					var rep doctorReport
					if err := json.Unmarshal(out.Bytes(), &rep); err != nil || !tt.wantJSON(rep) {
						t.Fatalf("report %s (%v)", out.String(), err)
					}
				}
			}
			if n := tt.f.others.Load(); n != 0 {
				t.Fatalf("doctor made %d requests beyond its questions", n)
			}
		})
	}
}
