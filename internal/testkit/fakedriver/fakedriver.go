// Package fakedriver is a driver (package adapter/driver) of a runtime
// held in memory, for the engine's own tests: fast, without a daemon, and
// scriptable. Every method does what a real runtime would do to its
// in-memory objects, unless the test sets the func field of the same name,
// which is called instead (and may call the default: Runtime's methods).
//
// Objects are containers ("container" kind; a layout's main objects),
// networks and anything else a layout names; ids are "id-<n>"; names are
// unique per kind, as a runtime's are. A container is Running once
// started. Nothing here is a sandbox: no process runs, Exec answers what
// ExecFunc says (a failure by default), Dial dials what DialFunc says.
package fakedriver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/attest/evidence"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
)

// RunBase is where the fake's workspace directories are named.
const RunBase = "/fake-run"

// Object is one object of the runtime.
type Object struct {
	Kind    campaign.Kind
	Role    string
	ID      string
	Name    string
	Labels  map[string]string
	Running bool
	// Version changes with every change of the object (a removal's
	// precondition compares it).
	Version int
	// Task is what the workspace was bound to ("" for none).
	Task string
}

// Driver is the fake. Set its func fields before the first call.
type Driver struct {
	// Runtime holds the objects; its methods are the defaults.
	Runtime *Runtime

	CreateFunc func(ctx context.Context, o *driver.Object) (string, error)
	StartFunc  func(ctx context.Context, o *driver.Object) error
	ReadyFunc  func(ctx context.Context, o *driver.Object) error
	RemoveFunc func(ctx context.Context, r campaign.Resource, seen cleanup.Observation) error
	ExecFunc   func(ctx context.Context, id string, cmd []string, opts driver.ExecOptions) (driver.ExecResult, error)
	DialFunc   func(ctx context.Context, w driver.Workspace) (net.Conn, error)
	ListFunc   func(ctx context.Context, labels ...string) ([]cleanup.Found, error)
	// InfoFunc, when set, changes what Info says (another runtime's
	// identity).
	InfoFunc func(driver.Info) driver.Info
	// ImagesHeld are the images Resolve answers for (ref -> id); a
	// reference that is an id in it answers with itself.
	ImagesHeld map[string]string
}

// New returns a fake on an empty runtime holding the given images.
func New(images map[string]string) *Driver {
	return &Driver{Runtime: &Runtime{objects: map[string]*Object{}}, ImagesHeld: images}
}

var _ driver.Driver = (*Driver)(nil)

// Info says the fake is "fake", on runtime "fake-runtime".
func (d *Driver) Info() driver.Info {
	i := driver.Info{
		Name:    "fake",
		Runtime: attest.DaemonRecord{ID: "fake-runtime", ServerVersion: "1", RootDir: "/fake", Rootless: true, Endpoint: "fake://"},
		Daemon:  campaign.Daemon{ID: "fake-runtime", Rootless: true},
		RunBase: RunBase,
		Kinds:   []campaign.Kind{campaign.KindContainer, campaign.KindDir, campaign.KindNetwork},
		Capabilities: driver.Capabilities{
			EnforcedNetworkPolicy: true,
			Attestable:            true,
			MaxWorkspaces:         campaign.MaxWorkspaces,
		},
	}
	if d.InfoFunc != nil {
		i = d.InfoFunc(i)
	}
	return i
}

// Resolve answers from ImagesHeld.
func (d *Driver) Resolve(_ context.Context, ref string) (string, error) {
	if id, ok := d.ImagesHeld[ref]; ok {
		return id, nil
	}
	for _, id := range d.ImagesHeld {
		if id == ref {
			return id, nil
		}
	}
	return "", driver.Kind("no such image "+ref, driver.ErrNotFound)
}

// Images lists ImagesHeld.
func (d *Driver) Images(context.Context) ([]api.Image, error) {
	var out []api.Image
	for ref, id := range d.ImagesHeld {
		out = append(out, api.Image{ID: id, Tags: []string{ref}})
	}
	slices.SortFunc(out, func(x, y api.Image) int { return strings.Compare(x.ID, y.ID) })
	return out, nil
}

// Settings are none: the fake creates with no settings.
func (d *Driver) Settings(*campaign.Plan) map[string]attest.RoleSettings {
	return map[string]attest.RoleSettings{}
}

// Check refuses nothing.
func (d *Driver) Check(*campaign.Plan) error { return nil }

// Layout lays out a network per planned network, the server, and each
// workspace as a directory and a container.
func (d *Driver) Layout(_ context.Context, b driver.BringUp) (*driver.Layout, error) {
	p := b.Plan
	l := &driver.Layout{}
	if b.Campaign {
		var nets []*driver.Object
		for _, n := range p.Networks {
			nets = append(nets, &driver.Object{Kind: campaign.KindNetwork, Role: campaign.RoleNetwork, Name: n.Name, Labels: maps.Clone(n.Labels)})
		}
		if len(nets) > 0 {
			l.Shared = append(l.Shared, nets)
		}
		l.Server = &driver.Unit{Agent: -1, Main: &driver.Object{Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: p.Server.Name, Labels: maps.Clone(p.Server.Labels)}}
	}
	for _, i := range b.Agents {
		ag := p.Agents[i]
		l.Workspaces = append(l.Workspaces, &driver.Unit{Agent: i,
			Needs: []*driver.Object{{Kind: campaign.KindDir, Role: campaign.RoleWork, Name: RunBase + "/i-" + p.Instance[:16] + "/" + ag.AgentID}},
			Main:  &driver.Object{Kind: campaign.KindContainer, Role: campaign.RoleWork, Name: ag.Name, Labels: maps.Clone(ag.Labels)}})
	}
	return l, nil
}

// Create makes the object (CreateFunc if set).
func (d *Driver) Create(ctx context.Context, o *driver.Object) (string, error) {
	if d.CreateFunc != nil {
		return d.CreateFunc(ctx, o)
	}
	return d.Runtime.Create(o)
}

// Start marks a container running (StartFunc if set).
func (d *Driver) Start(ctx context.Context, o *driver.Object) error {
	if d.StartFunc != nil {
		return d.StartFunc(ctx, o)
	}
	return d.Runtime.Start(o.ID)
}

// Ready answers at once for a running container (ReadyFunc if set).
func (d *Driver) Ready(ctx context.Context, o *driver.Object) error {
	if d.ReadyFunc != nil {
		return d.ReadyFunc(ctx, o)
	}
	ob, ok := d.Runtime.Get(o.ID)
	if !ok || !ob.Running {
		return fmt.Errorf("%w: %s is not running", driver.ErrNotReady, o.Name)
	}
	return nil
}

// Exec fails unless ExecFunc says otherwise: no process runs here.
func (d *Driver) Exec(ctx context.Context, id string, cmd []string, opts driver.ExecOptions) (driver.ExecResult, error) {
	if d.ExecFunc != nil {
		return d.ExecFunc(ctx, id, cmd, opts)
	}
	return driver.ExecResult{ExitCode: -1}, errors.New("fakedriver: no process runs here")
}

// Observe looks the resource up by id.
func (d *Driver) Observe(_ context.Context, r campaign.Resource) cleanup.Observation {
	obs := cleanup.Observation{State: cleanup.Absent, RunRoot: RunBase}
	ob, ok := d.Runtime.Get(r.ID)
	if ok && ob.Kind == r.Kind {
		obs.State, obs.ID, obs.Labels, obs.Version = cleanup.Present, ob.ID, maps.Clone(ob.Labels), fmt.Sprint(ob.Version)
	}
	return obs
}

// Lookup looks the resource up by kind and name.
func (d *Driver) Lookup(_ context.Context, r campaign.Resource, _ string) (driver.Found, error) {
	ob, ok := d.Runtime.ByName(r.Kind, r.Name)
	if !ok {
		return driver.Found{Absent: true}, nil
	}
	if ob.Labels == nil && r.Labels == nil {
		return driver.Found{ID: ob.ID, Proven: true}, nil
	}
	return driver.Found{ID: ob.ID, Labels: maps.Clone(ob.Labels)}, nil
}

// Remove removes the resource by id (RemoveFunc if set), refusing a
// version other than the one seen.
func (d *Driver) Remove(ctx context.Context, r campaign.Resource, seen cleanup.Observation) error {
	if d.RemoveFunc != nil {
		return d.RemoveFunc(ctx, r, seen)
	}
	return d.Runtime.Remove(r.ID, seen.Version)
}

// List lists the objects carrying every label (ListFunc if set).
func (d *Driver) List(ctx context.Context, labels ...string) ([]cleanup.Found, error) {
	if d.ListFunc != nil {
		return d.ListFunc(ctx, labels...)
	}
	return d.Runtime.List(labels...), nil
}

// Workspace is the workspace's container and directory.
func (d *Driver) Workspace(ag campaign.AgentPlan, live []campaign.Resource) (driver.Workspace, error) {
	w := driver.Workspace{AgentID: ag.AgentID}
	dir := false
	for _, r := range live {
		switch {
		case r.ID == "" || r.Role != campaign.RoleWork:
		case r.Kind == campaign.KindContainer && r.Name == ag.Name:
			w.ID = r.ID
			w.Resources = append(w.Resources, r)
		case r.Kind == campaign.KindDir && strings.HasSuffix(r.Name, "/"+ag.AgentID):
			dir = true
			w.Resources = append(w.Resources, r)
		}
	}
	if !dir {
		return w, fmt.Errorf("workspace %s: its directory is not in the journal", ag.AgentID)
	}
	return w, nil
}

// Dial calls DialFunc (refused without one).
func (d *Driver) Dial(ctx context.Context, w driver.Workspace) (net.Conn, error) {
	if d.DialFunc != nil {
		return d.DialFunc(ctx, w)
	}
	return nil, errors.New("fakedriver: nothing to dial")
}

// Bind records the task on the workspace's directory, once.
func (d *Driver) Bind(_ context.Context, w driver.Workspace, task string) error {
	for _, r := range w.Resources {
		if r.Kind == campaign.KindDir {
			return d.Runtime.bind(r.ID, task)
		}
	}
	return fmt.Errorf("workspace %s: no directory to bind", w.AgentID)
}

// Activity is zero: nothing serves here.
func (d *Driver) Activity(context.Context, []campaign.Resource) time.Time { return time.Time{} }

// Results are none.
func (d *Driver) Results(context.Context, driver.Workspace, int64) ([]byte, error) { return nil, nil }

// Evidence is the objects as they are, with every container running and
// labelled as it is.
func (d *Driver) Evidence(_ context.Context, q driver.EvidenceQuery) evidence.Runtime {
	rt := evidence.Runtime{Endpoint: "fake://", Daemon: evidence.Daemon{ID: "fake-runtime", ServerVersion: "1", RootDir: "/fake", SecurityOpts: []string{"name=rootless"}},
		Networks: map[string]evidence.Network{}, Containers: map[string]evidence.Container{}, Images: map[string]evidence.Image{}}
	for _, r := range q.Resources {
		ob, ok := d.Runtime.Get(r.ID)
		switch r.Kind {
		case campaign.KindContainer:
			if !ok {
				rt.Containers[r.ID] = evidence.Container{Answer: evidence.Answer{NotFound: true}}
				continue
			}
			rt.Containers[r.ID] = evidence.Container{ID: ob.ID, Name: "/" + ob.Name, Labels: maps.Clone(ob.Labels), Running: ob.Running, HasState: true}
		case campaign.KindNetwork:
			if !ok {
				rt.Networks[r.ID] = evidence.Network{Answer: evidence.Answer{NotFound: true}}
				continue
			}
			rt.Networks[r.ID] = evidence.Network{ID: ob.ID, Name: ob.Name, Labels: maps.Clone(ob.Labels)}
		}
	}
	for _, f := range d.Runtime.List(campaign.LabelCampaign + "=" + q.CampaignID) {
		l := evidence.Listed{ID: f.ID, Name: f.Name, Labels: f.Labels}
		if f.Kind == campaign.KindNetwork {
			rt.NetworkList.Items = append(rt.NetworkList.Items, l)
		} else {
			rt.ContainerList.Items = append(rt.ContainerList.Items, l)
		}
	}
	for _, f := range d.Runtime.List(campaign.LabelUIDBlock) {
		rt.UIDBlocks.Items = append(rt.UIDBlocks.Items, evidence.Listed{ID: f.ID, Name: f.Name, Labels: f.Labels})
	}
	return rt
}

// Close does nothing.
func (d *Driver) Close() error { return nil }

// Runtime is the fake's objects. Its methods act on them as the runtime
// would, and as another client of it would (a test's hand).
type Runtime struct {
	mu      sync.Mutex
	next    int
	objects map[string]*Object // by id
}

// Create makes an object with o's kind, role, name and labels.
func (rt *Runtime) Create(o *driver.Object) (string, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, ob := range rt.objects {
		if ob.Kind == o.Kind && ob.Name == o.Name {
			return "", driver.Kind(fmt.Sprintf("create %s: the name is taken by %s", o.Name, ob.ID), driver.ErrNameTaken)
		}
	}
	rt.next++
	id := fmt.Sprintf("id-%d", rt.next)
	if o.Kind == campaign.KindDir {
		id = o.Name // a directory's id is its path, as on a host
	}
	rt.objects[id] = &Object{Kind: o.Kind, Role: o.Role, ID: id, Name: o.Name, Labels: maps.Clone(o.Labels), Version: 1}
	return id, nil
}

// Start marks the object running.
func (rt *Runtime) Start(id string) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	ob, ok := rt.objects[id]
	if !ok {
		return driver.Kind("start: no such object "+id, driver.ErrNotFound)
	}
	ob.Running = true
	ob.Version++
	return nil
}

// Get returns a copy of the object with id.
func (rt *Runtime) Get(id string) (Object, bool) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	ob, ok := rt.objects[id]
	if !ok {
		return Object{}, false
	}
	return *ob, true
}

// ByName returns a copy of the object of kind named name.
func (rt *Runtime) ByName(kind campaign.Kind, name string) (Object, bool) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, ob := range rt.objects {
		if ob.Kind == kind && ob.Name == name {
			return *ob, true
		}
	}
	return Object{}, false
}

// Remove removes the object with id; version, when not "", must be its
// version.
func (rt *Runtime) Remove(id, version string) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	ob, ok := rt.objects[id]
	if !ok {
		return driver.Kind("remove: no such object "+id, driver.ErrNotFound)
	}
	if version != "" && version != fmt.Sprint(ob.Version) {
		return driver.Kind(fmt.Sprintf("remove %s: version %s, seen %s", id, fmt.Sprint(ob.Version), version), driver.ErrChanged)
	}
	delete(rt.objects, id)
	return nil
}

// Relabel sets the object's labels, as another client could.
func (rt *Runtime) Relabel(id string, labels map[string]string) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	ob, ok := rt.objects[id]
	if !ok {
		return driver.Kind("relabel: no such object "+id, driver.ErrNotFound)
	}
	ob.Labels = maps.Clone(labels)
	ob.Version++
	return nil
}

// Objects returns copies of every object, by id.
func (rt *Runtime) Objects() []Object {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var out []Object
	for _, ob := range rt.objects {
		out = append(out, *ob)
	}
	slices.SortFunc(out, func(x, y Object) int { return strings.Compare(x.ID, y.ID) })
	return out
}

// List lists the objects carrying every label ("key=value" or "key").
func (rt *Runtime) List(labels ...string) []cleanup.Found {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var out []cleanup.Found
	for _, ob := range rt.objects {
		if ob.Labels == nil {
			continue
		}
		all := true
		for _, l := range labels {
			k, v, hasV := strings.Cut(l, "=")
			got, ok := ob.Labels[k]
			if !ok || hasV && got != v {
				all = false
			}
		}
		if all {
			out = append(out, cleanup.Found{Kind: ob.Kind, ID: ob.ID, Name: ob.Name, Labels: maps.Clone(ob.Labels)})
		}
	}
	slices.SortFunc(out, func(x, y cleanup.Found) int { return strings.Compare(x.ID, y.ID) })
	return out
}

func (rt *Runtime) bind(id, task string) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	ob, ok := rt.objects[id]
	if !ok {
		return driver.Kind("bind: no such object "+id, driver.ErrNotFound)
	}
	if ob.Task != "" {
		return fmt.Errorf("bind %s: bound already", id)
	}
	ob.Task = task
	return nil
}
