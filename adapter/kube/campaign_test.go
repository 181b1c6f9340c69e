//go:build kube

package kube_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/adapter/drivertest"
	"github.com/agentpen/agentpen/adapter/kube"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/kuberig"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const testKey = "cluster-test-key-0123456789abcdef"

func engine(t *testing.T, d driver.Driver) *drivertest.Harness { return engineB(t, d) }

// onTheNode is a cluster test's opening: the driver on the rig, the
// engine on it, the test's context, and a campaign id of prefix whose
// campaign is removed when the test ends.
func onTheNode(t *testing.T, prefix string) (*kube.Driver, *drivertest.Harness, context.Context, string) {
	t.Helper()
	d := open(t)
	h := engine(t, d)
	id := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1e9)
	t.Cleanup(func() { h.Cleanup(context.Background(), id) })
	return d, h, testenv.Context(t), id
}

func engineB(t testing.TB, d driver.Driver) *drivertest.Harness {
	t.Helper()
	a := &adapter.Adapter{Driver: d, Getenv: func(k string) string { return map[string]string{campaign.DefaultAPIKeyEnv: testKey}[k] },
		ReadyTimeout: 2 * time.Minute}
	return drivertest.NewHarness(t, a, "")
}

func spec(t testing.TB, d *kube.Driver, id string, n int) campaign.CampaignSpec {
	t.Helper()
	image, err := d.Resolve(t.Context(), testenv.WorkbenchImage())
	if err != nil {
		t.Fatalf("the workbench image on the node: %v", err)
	}
	return drivertest.MedianSpec(image)(id, n)
}

// wideSpec is spec with each workspace running a launcher's own command:
// its pod is never bound (a Pending pod cannot be exec'd into), as the
// workbench's would be once running.
func wideSpec(t testing.TB, d *kube.Driver, id string, n int) campaign.CampaignSpec {
	t.Helper()
	s := spec(t, d, id, n)
	for i := range s.Workspaces {
		s.Workspaces[i].Command = []string{"sleep", "infinity"}
	}
	return s
}

// TestCampaignRunsOnTheNode: a campaign of three workspaces comes up on
// the node (every pod Running and Ready: the grader, each workbench),
// each workspace hostUsers false under the Localhost seccomp profile, and
// is removed by exact UID, verified; verify then writes nothing and
// stays verified.
func TestCampaignRunsOnTheNode(t *testing.T) {
	d := open(t)
	h := engine(t, d)
	id := fmt.Sprintf("node-%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() { h.Cleanup(context.Background(), id) })
	c, err := h.BringUp(t.Context(), spec(t, d, id, 3))
	if err != nil {
		t.Fatal(err)
	}
	cs, _ := kuberig.Client(t)
	if len(c.Workspaces) != 3 {
		t.Fatalf("%d workspaces", len(c.Workspaces))
	}
	for _, w := range c.Workspaces {
		ns, name := podName(w.Handle)
		pod, err := cs.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Status.Phase != corev1.PodRunning || pod.Spec.HostUsers == nil || *pod.Spec.HostUsers ||
			pod.Spec.Containers[0].SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost || *pod.Spec.AutomountServiceAccountToken {
			t.Fatalf("pod %s: phase %s, hostUsers %v, seccomp %+v", name, pod.Status.Phase, pod.Spec.HostUsers, pod.Spec.Containers[0].SecurityContext.SeccompProfile)
		}
	}
	rep, err := h.Cleanup(t.Context(), id)
	if err != nil || !rep.OK {
		t.Fatalf("removal: %v %+v", err, rep)
	}
	if rep, err := h.Verify(t.Context(), id); err != nil || !rep.OK {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

func podName(w driver.Workspace) (string, string) {
	for _, r := range w.Resources {
		if r.Kind == campaign.KindContainer {
			ns, name := split(r)
			return ns, name
		}
	}
	return "", ""
}

// pending is the driver with workspace pods left Pending: no node named,
// no scheduler to place them (the kubelet takes at most 110 pods); the
// grader runs, so that they have its address to name.
type pending struct{ driver.Driver }

func (pending) Ready(context.Context, *driver.Object) error { return nil }

// TestCampaignOf256Pending: a campaign of 256 workspaces against the API
// server (its pods Pending: no node, no scheduler) is made and removed by
// exact UID, verified: the cluster takes what the daemon does not (64).
func TestCampaignOf256Pending(t *testing.T) {
	kuberig.Config(t)
	d := open(t)
	kube.LeaveWorkspacesUnplaced(d)
	h := engine(t, pending{d})
	id := fmt.Sprintf("wide-%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() { h.Cleanup(context.Background(), id) })
	start := time.Now()
	c, err := h.BringUp(t.Context(), wideSpec(t, d, id, 256))
	if err != nil {
		t.Fatal(err)
	}
	up := time.Since(start)
	if len(c.Workspaces) != 256 {
		t.Fatalf("%d workspaces", len(c.Workspaces))
	}
	start = time.Now()
	rep, err := h.Cleanup(t.Context(), id)
	if err != nil || !rep.OK {
		t.Fatalf("removal: %v %+v", err, rep)
	}
	t.Logf("256 workspaces: bring-up %s, removal %s", up, time.Since(start))
	found, err := d.List(t.Context(), campaign.LabelCampaign+"="+id)
	if err != nil || len(found) > 0 {
		t.Fatalf("left: %v %v", found, err)
	}
}

// TestRefusedBeforeAnything: what the namespace's Pod Security level
// would refuse (a host path) is refused before anything is made, naming
// the field; an image the node lacks is refused the same way.
func TestRefusedBeforeAnything(t *testing.T) {
	d := open(t)
	h := engine(t, d)
	for _, tt := range []struct {
		name  string
		edit  func(*campaign.CampaignSpec)
		field string
	}{
		{"host_path", func(s *campaign.CampaignSpec) { s.Workspaces[0].WorkspaceHostPath = "/srv" }, "workspaces[0].workspace_host_path"},
		{"missing_image", func(s *campaign.CampaignSpec) { s.Workspaces[0].Image = "agentpen/absent:none" }, "workspaces[0].image"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("refused-%d", time.Now().UnixNano()%1e9)
			s := spec(t, d, id, 1)
			tt.edit(&s)
			_, err := h.BringUp(t.Context(), s)
			var ve *campaign.ValidationError
			if !errors.As(err, &ve) || ve.Field != tt.field {
				t.Fatalf("got %v, want a validation error naming %s", err, tt.field)
			}
			if found, err := d.List(t.Context(), campaign.LabelCampaign+"="+id); err != nil || len(found) > 0 {
				t.Fatalf("made %v (%v)", found, err)
			}
		})
	}
}
