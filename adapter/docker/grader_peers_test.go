package docker

import (
	"bufio"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// TestGraderServesEveryWorkspace: on the grader's unix socket (topology
// none) every client is container root of some workspace, and a rootless
// daemon maps every container's root to one uid, so the grader's cap per
// peer counted every workspace as one peer: with 32 workspaces probing at
// once it closed their connections at accept, and attestations failed
// under load (TestManyWorkspaces). Here more connections than that cap
// (64) are held open from one uid, the host's root, and the last ones are
// still answered.
func TestGraderServesEveryWorkspace(t *testing.T) {
	a, cli := realAdapter(t, "grader-peers-key-5d0c2e9a7b13f468", nil)
	c := realCampaign(t, a, cli, 1)
	sock := filepath.Join(graderDirOf(a.Adapter, c.Plan), "grader.sock")
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range 80 {
		conn, err := net.DialTimeout("unix", sock, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	for i, conn := range conns[70:] {
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write([]byte("GET /health HTTP/1.1\r\nHost: grader\r\n\r\n")); err != nil {
			t.Fatalf("connection %d: %v", 70+i, err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("connection %d of one uid, over the cap per peer: %v", 70+i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d: status %d", 70+i, resp.StatusCode)
		}
	}
}
