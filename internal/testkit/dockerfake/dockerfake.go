// Package dockerfake is a scripted Docker Engine API for unit tests: the
// daemon is faked at the HTTP transport, the way the moby client's own tests
// do it, so the code under test runs the real SDK and its real error kinds
// (a 404 is cerrdefs.IsNotFound, a 409 IsConflict).
//
// A Daemon keeps a small model of what was created (networks, containers,
// images) so a test scripts only the faults it is about: each route answers
// from the model unless a script for its pattern says otherwise, call by
// call. Every call is recorded. The same Daemon serves an *http.Client
// (Client, for the adapter's unit tests) and a unix socket (ServeUnix, for
// the CLI's).
//
// It imports nothing of the Docker SDK: bodies are written as the daemon
// writes them, as JSON, so the SDK decodes them as it would the daemon's.
// It models only what agentpen calls; anything else answers 404.
package dockerfake

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// APIVersion is the version the fake daemon reports (the real one here
// speaks 1.41).
const APIVersion = "1.41"

// Reply is one scripted answer.
type Reply struct {
	// Status is the HTTP status; 0 means 200 (204 for an empty Body on a
	// DELETE or a start).
	Status int
	// Body is written as JSON; a string is written as a daemon error
	// message ({"message": Body}) when Status is 4xx or 5xx and as is
	// otherwise.
	Body any
	// Apply, with a Status >= 400, first lets the model carry the call
	// out, then answers with the error anyway: a create the daemon
	// completed although the client was told it failed (a timeout or a
	// cancelled request).
	Apply bool
	// Drop closes the connection without an answer.
	Drop bool
}

// Pass is a scripted step that lets the model answer.
var Pass = Reply{Status: -1}

// Call is one request the fake received.
type Call struct {
	Method string
	// Path is the request path without the /v1.xx prefix.
	Path  string
	Query url.Values
	Body  []byte
}

// String is "METHOD /path".
func (c Call) String() string { return c.Method + " " + c.Path }

// Network is the model of a network.
type Network struct {
	ID       string
	Name     string
	Driver   string
	Internal bool
	Labels   map[string]string
}

// Container is the model of a container.
type Container struct {
	ID      string
	Name    string
	Image   string
	Labels  map[string]string
	Running bool
}

type script struct {
	method string
	path   []string
	steps  []Reply
	fn     func(Call) Reply
}

// Daemon is a fake Docker daemon. The zero value is not usable; call New.
type Daemon struct {
	mu         sync.Mutex
	scripts    []*script
	calls      []Call
	info       map[string]any
	networks   map[string]*Network
	containers map[string]*Container
	images     map[string]string // ref -> id
	inFlight   int               // calls received and not yet carried out
}

// New returns a rootless daemon with no networks, containers or images.
func New() *Daemon {
	return &Daemon{
		info: map[string]any{
			"ID": "FAKE:ROOTLESS", "Name": "fake", "ServerVersion": "20.10.24+dfsg1",
			"DockerRootDir": "/home/agentpen/.local/share/docker", "CgroupDriver": "none", "CgroupVersion": "1",
			"SecurityOptions": []string{"name=seccomp,profile=default", "name=rootless"},
			"MemoryLimit":     true, "PidsLimit": true,
		},
		networks:   map[string]*Network{},
		containers: map[string]*Container{},
		images:     map[string]string{},
	}
}

// SetInfo replaces fields of the /info answer (SecurityOptions,
// CgroupDriver, ...).
func (d *Daemon) SetInfo(fields map[string]any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, v := range fields {
		d.info[k] = v
	}
}

// AddImage makes ref (and id) inspectable.
func (d *Daemon) AddImage(ref, id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.images[ref] = id
	d.images[id] = id
}

// AddContainer puts a container in the model, as if something else had
// created it.
func (d *Daemon) AddContainer(c Container) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c.ID == "" {
		c.ID = newID()
	}
	d.containers[c.ID] = &c
}

// AddNetwork puts a network in the model, as if something else had
// created it.
func (d *Daemon) AddNetwork(n Network) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n.ID == "" {
		n.ID = newID()
	}
	d.networks[n.ID] = &n
}

// Containers returns the model's containers, sorted by name.
func (d *Daemon) Containers() []Container {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []Container
	for _, c := range d.containers {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Container) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Networks returns the model's networks, sorted by name.
func (d *Daemon) Networks() []Network {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []Network
	for _, n := range d.networks {
		out = append(out, *n)
	}
	slices.SortFunc(out, func(a, b Network) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// On scripts the answers to requests matching pattern ("METHOD /path",
// where a {name} segment matches any one segment: "POST /containers/create",
// "DELETE /containers/{id}"). The first matching call gets replies[0], the
// next replies[1], and the last reply answers every later call; Pass lets
// the model answer. A later On for the same pattern replaces the script.
func (d *Daemon) On(pattern string, replies ...Reply) {
	d.onScript(pattern, &script{steps: replies})
}

// OnFunc answers requests matching pattern with fn (which may return Pass).
func (d *Daemon) OnFunc(pattern string, fn func(Call) Reply) {
	d.onScript(pattern, &script{fn: fn})
}

func (d *Daemon) onScript(pattern string, s *script) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok || !strings.HasPrefix(path, "/") {
		panic("dockerfake: pattern must be \"METHOD /path\": " + pattern)
	}
	s.method, s.path = method, strings.Split(path[1:], "/")
	d.mu.Lock()
	defer d.mu.Unlock()
	d.scripts = slices.DeleteFunc(d.scripts, func(o *script) bool {
		return o.method == s.method && slices.Equal(o.path, s.path)
	})
	d.scripts = append(d.scripts, s)
}

// Calls returns every call so far, in order.
func (d *Daemon) Calls() []Call {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// CallsTo returns the calls matching pattern (as in On).
func (d *Daemon) CallsTo(pattern string) []Call {
	method, path, _ := strings.Cut(pattern, " ")
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	var out []Call
	for _, c := range d.Calls() {
		if c.Method == method && matchPath(segs, c.Path) {
			out = append(out, c)
		}
	}
	return out
}

// Client returns an HTTP client whose transport is the fake: for
// client.WithHTTPClient.
func (d *Daemon) Client() *http.Client {
	return &http.Client{Transport: roundTripper{d}}
}

type roundTripper struct{ d *Daemon }

// RoundTrip serves req in its own goroutine and gives up when the
// request's context is done, as a client does (with the context's cause):
// the fake, like the daemon, carries the call out anyway (a cancelled
// create still creates).
func (rt roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	inner := req.Clone(context.WithoutCancel(req.Context()))
	inner.Body = io.NopCloser(bytes.NewReader(body))
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	rt.d.begin() // before the goroutine: counted once the client sent it
	go func() {
		defer rt.d.end()
		rec := httptest.NewRecorder()
		if dropped := rt.d.serve(rec, inner); dropped {
			done <- result{err: fmt.Errorf("dockerfake: connection dropped (%s %s)", req.Method, req.URL.Path)}
			return
		}
		resp := rec.Result()
		resp.Request = req
		done <- result{resp: resp}
	}()
	select {
	case r := <-done:
		return r.resp, r.err
	case <-req.Context().Done():
		// As net/http's transport does: the context's cause, which is
		// not always a cancellation (errgroup.WithContext sets the
		// first error of a sibling).
		return nil, context.Cause(req.Context())
	}
}

// ServeUnix serves the fake on a unix socket in a fresh directory until
// the test ends and returns its DOCKER_HOST value ("unix://.../docker.sock",
// in a directory named "rootless" so the path passes the rootless-shape
// check).
func (d *Daemon) ServeUnix(t testing.TB) string {
	t.Helper()
	return d.ServeUnixAt(t, filepath.Join(t.TempDir(), "rootless", "docker.sock"))
}

// ServeUnixAt is ServeUnix on the socket path sock (its directory made
// when missing).
func (d *Daemon) ServeUnixAt(t testing.TB, sock string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: d}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "unix://" + sock
}

// InFlight is how many calls the fake has been handed and has not yet
// carried out: a test that waits for it to be 0 knows a create its
// client gave up on has landed (or never will), without sleeping.
func (d *Daemon) InFlight() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inFlight
}

func (d *Daemon) begin() {
	d.mu.Lock()
	d.inFlight++
	d.mu.Unlock()
}

func (d *Daemon) end() {
	d.mu.Lock()
	d.inFlight--
	d.mu.Unlock()
}

// SetRunning sets whether the container id is running, as its process
// exiting (or a start) would.
func (d *Daemon) SetRunning(id string, running bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.containerByRef(id); c != nil {
		c.Running = running
	}
}

// ServeHTTP answers one request.
func (d *Daemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.begin()
	defer d.end()
	if dropped := d.serve(w, r); dropped {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
			}
		}
	}
}

var versionPrefix = regexp.MustCompile(`^/v[0-9]+\.[0-9]+`)

func (d *Daemon) serve(w http.ResponseWriter, r *http.Request) (dropped bool) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
	}
	c := Call{Method: r.Method, Path: versionPrefix.ReplaceAllString(r.URL.Path, ""), Query: r.URL.Query(), Body: body}
	d.mu.Lock()
	d.calls = append(d.calls, c)
	reply := Pass
	segs := strings.Split(strings.TrimPrefix(c.Path, "/"), "/")
	for _, s := range d.scripts {
		if s.method != c.Method || !matchPath(s.path, c.Path) || len(s.path) != len(segs) {
			continue
		}
		if s.fn != nil {
			fn := s.fn
			d.mu.Unlock()
			reply = fn(c)
			d.mu.Lock()
		} else if len(s.steps) > 0 {
			reply = s.steps[0]
			if len(s.steps) > 1 {
				s.steps = s.steps[1:]
			}
		}
		break
	}
	if reply.Drop {
		d.mu.Unlock()
		return true
	}
	var status int
	var out any
	if reply.Status == Pass.Status || reply.Apply {
		status, out = d.model(c)
	}
	d.mu.Unlock()
	if reply.Status != Pass.Status {
		status, out = reply.Status, reply.Body
		if status == 0 {
			status = http.StatusOK
		}
		if s, ok := out.(string); ok && status >= 400 {
			out = map[string]string{"message": s}
		}
	}
	w.Header().Set("Api-Version", APIVersion)
	w.Header().Set("Content-Type", "application/json")
	if out == nil {
		if status == http.StatusOK && (c.Method == http.MethodDelete || strings.HasSuffix(c.Path, "/start")) {
			status = http.StatusNoContent
		}
		w.WriteHeader(status)
		return false
	}
	w.WriteHeader(status)
	if s, ok := out.(string); ok {
		io.WriteString(w, s)
		return false
	}
	json.NewEncoder(w).Encode(out)
	return false
}

// matchPath matches a request path against pattern segments.
func matchPath(pattern []string, path string) bool {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(segs) != len(pattern) {
		return false
	}
	for i, p := range pattern {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			if segs[i] == "" {
				return false
			}
			continue
		}
		if p != segs[i] {
			return false
		}
	}
	return true
}

func notFound(what, ref string) (int, any) {
	return http.StatusNotFound, map[string]string{"message": fmt.Sprintf("No such %s: %s", what, ref)}
}

// model answers a call from the model; d.mu is held.
func (d *Daemon) model(c Call) (int, any) {
	seg := strings.Split(strings.TrimPrefix(c.Path, "/"), "/")
	switch {
	case c.Method == http.MethodGet && c.Path == "/_ping", c.Method == http.MethodHead && c.Path == "/_ping":
		return http.StatusOK, "OK"
	case c.Method == http.MethodGet && c.Path == "/info":
		return http.StatusOK, d.info
	case c.Method == http.MethodGet && c.Path == "/images/json":
		var list []map[string]any
		for ref, id := range d.images {
			if ref != id {
				list = append(list, map[string]any{"Id": id, "RepoTags": []string{ref}})
			}
		}
		return http.StatusOK, list
	case c.Method == http.MethodGet && len(seg) >= 3 && seg[0] == "images" && seg[len(seg)-1] == "json":
		ref := strings.Join(seg[1:len(seg)-1], "/")
		if id, ok := d.images[ref]; ok {
			return http.StatusOK, map[string]any{"Id": id, "RepoTags": []string{ref}}
		}
		return notFound("image", ref)
	case c.Method == http.MethodPost && c.Path == "/networks/create":
		var req struct {
			Name     string
			Driver   string
			Internal bool
			Labels   map[string]string
		}
		json.Unmarshal(c.Body, &req)
		if d.networkByRef(req.Name) != nil {
			return http.StatusConflict, map[string]string{"message": fmt.Sprintf("network with name %s already exists", req.Name)}
		}
		n := &Network{ID: newID(), Name: req.Name, Driver: req.Driver, Internal: req.Internal, Labels: req.Labels}
		d.networks[n.ID] = n
		return http.StatusCreated, map[string]any{"Id": n.ID}
	case c.Method == http.MethodGet && len(seg) == 2 && seg[0] == "networks":
		n := d.networkByRef(seg[1])
		if n == nil {
			return notFound("network", seg[1])
		}
		return http.StatusOK, map[string]any{"Id": n.ID, "Name": n.Name, "Driver": n.Driver, "Internal": n.Internal, "Labels": n.Labels}
	case c.Method == http.MethodPost && len(seg) == 3 && seg[0] == "networks" && seg[2] == "connect":
		var req struct{ Container string }
		json.Unmarshal(c.Body, &req)
		n := d.networkByRef(seg[1])
		if n == nil {
			return notFound("network", seg[1])
		}
		if d.containerByRef(req.Container) == nil {
			return notFound("container", req.Container)
		}
		return http.StatusOK, nil
	case c.Method == http.MethodDelete && len(seg) == 2 && seg[0] == "networks":
		n := d.networkByRef(seg[1])
		if n == nil {
			return notFound("network", seg[1])
		}
		delete(d.networks, n.ID)
		return http.StatusNoContent, nil
	case c.Method == http.MethodPost && c.Path == "/containers/create":
		var req struct {
			Image  string
			Labels map[string]string
		}
		json.Unmarshal(c.Body, &req)
		name := c.Query.Get("name")
		if d.containerByRef(name) != nil {
			return http.StatusConflict, map[string]string{"message": fmt.Sprintf("Conflict. The container name %q is already in use", "/"+name)}
		}
		ct := &Container{ID: newID(), Name: name, Image: req.Image, Labels: req.Labels}
		d.containers[ct.ID] = ct
		return http.StatusCreated, map[string]any{"Id": ct.ID, "Warnings": []string{}}
	case c.Method == http.MethodGet && len(seg) == 3 && seg[0] == "containers" && seg[2] == "json":
		ct := d.containerByRef(seg[1])
		if ct == nil {
			return notFound("container", seg[1])
		}
		return http.StatusOK, map[string]any{
			"Id": ct.ID, "Name": "/" + ct.Name, "Image": ct.Image,
			"State":  map[string]any{"Running": ct.Running, "Status": map[bool]string{true: "running", false: "created"}[ct.Running]},
			"Config": map[string]any{"Labels": ct.Labels, "Image": ct.Image},
		}
	case c.Method == http.MethodPost && len(seg) == 3 && seg[0] == "containers" && seg[2] == "start":
		ct := d.containerByRef(seg[1])
		if ct == nil {
			return notFound("container", seg[1])
		}
		ct.Running = true
		return http.StatusNoContent, nil
	case c.Method == http.MethodDelete && len(seg) == 2 && seg[0] == "containers":
		ct := d.containerByRef(seg[1])
		if ct == nil {
			return notFound("container", seg[1])
		}
		delete(d.containers, ct.ID)
		return http.StatusNoContent, nil
	case c.Method == http.MethodGet && c.Path == "/containers/json":
		var list []map[string]any
		for _, ct := range d.containers {
			if matchesFilters(ct.Labels, c.Query.Get("filters")) {
				list = append(list, map[string]any{"Id": ct.ID, "Names": []string{"/" + ct.Name}, "Image": ct.Image, "Labels": ct.Labels})
			}
		}
		return http.StatusOK, list
	case c.Method == http.MethodGet && c.Path == "/networks":
		var list []map[string]any
		for _, n := range d.networks {
			if matchesFilters(n.Labels, c.Query.Get("filters")) {
				list = append(list, map[string]any{"Id": n.ID, "Name": n.Name, "Driver": n.Driver, "Internal": n.Internal, "Labels": n.Labels})
			}
		}
		return http.StatusOK, list
	}
	return http.StatusNotFound, map[string]string{"message": "page not found"}
}

// matchesFilters applies the "label" part of a filters query ({"label":
// {"k=v": true, "k": true}}), the only filter agentpen lists by.
func matchesFilters(labels map[string]string, raw string) bool {
	if raw == "" {
		return true
	}
	var f map[string]map[string]bool
	if err := json.Unmarshal([]byte(raw), &f); err != nil {
		return false
	}
	for cond := range f["label"] {
		k, v, hasV := strings.Cut(cond, "=")
		got, ok := labels[k]
		if !ok || hasV && got != v {
			return false
		}
	}
	return true
}

// networkByRef finds a network by id, unique id prefix or name; d.mu is
// held.
func (d *Daemon) networkByRef(ref string) *Network {
	if n, ok := d.networks[ref]; ok {
		return n
	}
	for _, n := range d.networks {
		if n.Name == ref {
			return n
		}
	}
	return nil
}

// containerByRef finds a container by id or name; d.mu is held.
func (d *Daemon) containerByRef(ref string) *Container {
	if ref == "" {
		return nil
	}
	if ct, ok := d.containers[ref]; ok {
		return ct
	}
	for _, ct := range d.containers {
		if ct.Name == strings.TrimPrefix(ref, "/") {
			return ct
		}
	}
	return nil
}

func newID() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}
