package probe

import (
	"os"
	"path/filepath"
	"testing"
)

// TestContainerIDPodOnDockerShim: a pod on a node whose runtime is
// Docker through cri-dockerd has its /etc/hostname under Docker's
// containers/<id>/hostname, listed before the kubelet's /etc/hosts. The
// probe then names the Docker container's id, not the pod's UID, and a
// cluster's attestation refuses every probe of the pod (fails closed; no
// lie, but a cluster on that runtime can never attest). In a pod, the
// kubelet's /etc/hosts names it. (Found by the review of issue 38.)
func TestContainerIDPodOnDockerShim(t *testing.T) {
	f := filepath.Join(t.TempDir(), "mountinfo")
	id := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	uid := "2aa87247-2ddd-441f-88a4-6a4a30a62eba"
	os.WriteFile(f, []byte("383 358 254:0 /var/lib/docker/containers/"+id+"/hostname /etc/hostname rw - ext4 /dev/vda rw\n"+
		"381 358 254:0 /var/lib/kubelet/pods/"+uid+"/etc-hosts /etc/hosts rw - ext4 /dev/vda rw\n"), 0o600)
	if got := containerID(f); got != uid {
		t.Fatalf("containerID in a pod on cri-dockerd = %q, want the pod's UID %q", got, uid)
	}
}
