package docker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/campaign"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"golang.org/x/sync/errgroup"
)

// maxSocketPath is the longest path a unix socket address holds.
const maxSocketPath = 107

// socketName is the workbench's socket in a workspace's run directory.
var socketName = filepath.Base(campaign.WorkbenchSocket)

// A layout's objects carry one of these as their Spec.
type (
	// networkPlan is an agent network: created on a subnet agentpen chose.
	networkPlan struct{ opts network.CreateOptions }
	// dirPlan is a directory of the bring-up's run root on the host.
	dirPlan struct{}
	// containerPlan is a container: what ContainerCreate takes, and what
	// starting it and awaiting it need.
	containerPlan struct {
		spec containerSpec
		// joins are the agent networks the server joins once started,
		// under alias.
		joins []*driver.Object
		alias string
		// ready is the server's readiness command; graderSocket, where
		// that command is the default one of topology none, the host's
		// path of the grader's socket it asks (so it is asked from the
		// host, as a workspace's is, without an exec); socket is a
		// workspace's workbench socket on the host (empty for the
		// server), agentID its agent.
		ready        []string
		graderSocket string
		socket       string
		agentID      string
	}
)

// Layout lays a bring-up out as the daemon's objects: the agent networks
// (one per agent, on /28 subnets of SubnetPool no network on the daemon
// uses, the daemon-wide subnet lock held until they exist), the grader's
// socket directory (topology none), then the server, and each workspace
// as its run directory (/run/workbench, bind-mounted) and its container.
func (d *Driver) Layout(ctx context.Context, b driver.BringUp) (*driver.Layout, error) {
	p := b.Plan
	if err := d.Check(p); err != nil {
		return nil, err
	}
	graderDir := ""
	if p.Topology == campaign.TopologyNone {
		graderDir = filepath.Join(d.runRoot(p.Instance), "grader")
	}
	l := &driver.Layout{}
	if b.Campaign {
		var nets []*driver.Object
		if len(p.Networks) > 0 {
			unlock, err := b.Lock(ctx, subnetLock)
			if err != nil {
				return nil, err
			}
			subnets, err := d.allocateSubnets(ctx, len(p.Networks))
			if err != nil {
				unlock()
				return nil, err
			}
			for i, n := range p.Networks {
				nets = append(nets, &driver.Object{Kind: campaign.KindNetwork, Role: campaign.RoleNetwork, Name: n.Name, Labels: clone(n.Labels),
					Spec: &networkPlan{opts: networkCreateOptions(n, subnets[i])}})
			}
			l.Shared, l.Done = append(l.Shared, nets), unlock
		}
		if graderDir != "" {
			l.Shared = append(l.Shared, []*driver.Object{{Kind: campaign.KindDir, Role: campaign.RoleServer, Name: graderDir, Spec: &dirPlan{}}})
		}
		s := serverSpec(p, b.APIKey, b.Secrets, d.host.SocketPath, graderDir)
		c := &containerPlan{spec: s, alias: p.Server.Alias, ready: p.Server.Spec.ReadyCommand}
		if graderDir != "" && slices.Equal(c.ready, campaign.DefaultReadyCommand(p.Topology, p.Server.Spec.Port)) {
			c.graderSocket = filepath.Join(graderDir, filepath.Base(campaign.GraderSocket))
		}
		if len(nets) > 1 {
			c.joins = nets[1:]
		}
		l.Server = &driver.Unit{Agent: -1, Main: &driver.Object{Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: s.Name, Labels: clone(p.Server.Labels), Spec: c}}
	}
	for _, i := range b.Agents {
		if i < 0 || i >= len(p.Agents) {
			return nil, fmt.Errorf("layout: no workspace %d in the plan", i)
		}
		ag := p.Agents[i]
		runDir := filepath.Join(d.runRoot(p.Instance), ag.AgentID)
		s := workspaceSpec(p, ag, runDir, graderDir, b.APIKey)
		l.Workspaces = append(l.Workspaces, &driver.Unit{
			Agent: i,
			Needs: []*driver.Object{{Kind: campaign.KindDir, Role: campaign.RoleWork, Name: runDir, Spec: &dirPlan{}}},
			Main: &driver.Object{Kind: campaign.KindContainer, Role: campaign.RoleWork, Name: s.Name, Labels: clone(ag.Labels),
				Spec: &containerPlan{spec: s, socket: filepath.Join(runDir, socketName), agentID: ag.AgentID}},
		})
	}
	return l, nil
}

// Check refuses a plan whose workbench sockets would not fit in a unix
// socket address under this daemon's run directories.
func (d *Driver) Check(p *campaign.Plan) error {
	if len(p.Agents) == 0 {
		return nil
	}
	// A run root is named by 16 digits of the instance nonce; an unbound
	// plan's are as long.
	instance := p.Instance
	if instance == "" {
		instance = strings.Repeat("0", 16)
	}
	if n := len(filepath.Join(d.runRoot(instance), p.Agents[0].AgentID, socketName)); n > maxSocketPath {
		return fmt.Errorf("the workbench socket path under %s would be %d bytes, over the %d of a unix socket address: use a daemon whose socket path is shorter", d.runBase(), n, maxSocketPath)
	}
	return nil
}

// Create makes one object of a layout, carrying exactly o.Labels.
func (d *Driver) Create(ctx context.Context, o *driver.Object) (string, error) {
	switch spec := o.Spec.(type) {
	case *networkPlan:
		opts := spec.opts
		opts.Labels = clone(o.Labels)
		resp, err := d.api.NetworkCreate(ctx, o.Name, opts)
		if err != nil {
			return "", errorf("create network %s: %w", o.Name, err)
		}
		d.log().Info("network created", "name", o.Name, "id", short(resp.ID), "internal", opts.Internal)
		return resp.ID, nil
	case *dirPlan:
		if err := d.makeRunDir(o.Name); err != nil {
			return "", err
		}
		return o.Name, nil
	case *containerPlan:
		s := spec.spec
		cfg := *s.Config
		cfg.Labels = clone(o.Labels)
		resp, err := d.api.ContainerCreate(ctx, &cfg, s.HostConfig, s.Networking, nil, s.Name)
		if err != nil {
			return "", errorf("create %s: %w", s, err)
		}
		d.log().Info("container created", "role", s.Role, "name", s.Name, "id", short(resp.ID))
		return resp.ID, nil
	}
	return "", fmt.Errorf("create %s: not an object this driver laid out", o)
}

// Start starts a container, and joins the server to the agent networks
// beyond its first, under its alias.
func (d *Driver) Start(ctx context.Context, o *driver.Object) error {
	c, ok := o.Spec.(*containerPlan)
	if !ok || o.ID == "" {
		return fmt.Errorf("start: %s is not a container made by this driver", o)
	}
	if err := d.api.ContainerStart(ctx, o.ID, container.StartOptions{}); err != nil {
		return errorf("start %s %s: %w", o.Role, o.Name, err)
	}
	var g errgroup.Group
	g.SetLimit(8)
	for _, n := range c.joins {
		g.Go(func() error {
			if n.ID == "" {
				return errors.New("connect the server: its network " + n.Name + " was not made")
			}
			if err := d.api.NetworkConnect(ctx, n.ID, o.ID, &network.EndpointSettings{Aliases: []string{c.alias}}); err != nil {
				return errorf("connect the server to network %s: %w", short(n.ID), err)
			}
			return nil
		})
	}
	return g.Wait()
}
