package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/internal/beneath"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
)

// Observe asks the daemon (or the file system, for a run directory) about
// one journalled resource, by its id.
func (d *Driver) Observe(ctx context.Context, r campaign.Resource) cleanup.Observation {
	var obs cleanup.Observation
	var err error
	switch r.Kind {
	case campaign.KindContainer:
		var info container.InspectResponse
		info, err = d.api.ContainerInspect(ctx, r.ID)
		if err == nil {
			obs = cleanup.Observation{State: cleanup.Present, ID: info.ID}
			if info.Config != nil {
				obs.Labels = info.Config.Labels
			}
		}
	case campaign.KindNetwork:
		var info network.Inspect
		info, err = d.api.NetworkInspect(ctx, r.ID, network.InspectOptions{})
		if err == nil {
			obs = cleanup.Observation{State: cleanup.Present, ID: info.ID, Labels: info.Labels}
		}
	case campaign.KindDir:
		obs.RunRoot = d.runBase()
		if _, rerr := d.runRel(r.ID); rerr != nil {
			// Not a run directory at all (a journal names it): looked at
			// as it is, never removed (Decide refuses it by its shape).
			if _, err = os.Lstat(r.ID); err == nil {
				obs.State = cleanup.Present
			} else if errors.Is(err, os.ErrNotExist) {
				obs.State, err = cleanup.Absent, nil
			}
			break
		}
		switch err = d.lstatRun(r.ID); {
		case err == nil:
			obs.State = cleanup.Present
		case errors.Is(err, os.ErrNotExist):
			obs.State, err = cleanup.Absent, nil
		case errors.Is(err, beneath.ErrLink):
			obs.State, obs.Diverted, err = cleanup.Present, "a symbolic link on its path (never followed): "+err.Error(), nil
		}
	default:
		err = fmt.Errorf("unknown kind %q", r.Kind)
	}
	switch err := classify(err); {
	case err == nil:
	case errors.Is(err, driver.ErrNotFound):
		obs.State = cleanup.Absent
	default:
		obs.State, obs.Err = cleanup.Unknown, err.Error()
	}
	return obs
}

// Lookup finds the container or network holding an intent's name (by an
// inspect of the exact name), or the run directory at its path: one that
// exists is Present only under the run root of the intent's generation
// (named with its instance nonce), which agentpen makes with one mkdir:
// so a directory's answer is definite at once.
func (d *Driver) Lookup(ctx context.Context, r campaign.Resource, instance string) (driver.Found, error) {
	switch r.Kind {
	case campaign.KindContainer:
		info, err := d.api.ContainerInspect(ctx, r.Name)
		switch err := classify(err); {
		case errors.Is(err, driver.ErrNotFound):
			return driver.Found{Absent: true}, nil
		case err != nil:
			return driver.Found{}, err
		}
		f := driver.Found{ID: info.ID}
		if info.Config != nil {
			f.Labels = info.Config.Labels
		}
		return f, nil
	case campaign.KindNetwork:
		info, err := d.api.NetworkInspect(ctx, r.Name, network.InspectOptions{})
		switch err := classify(err); {
		case errors.Is(err, driver.ErrNotFound):
			return driver.Found{Absent: true}, nil
		case err != nil:
			return driver.Found{}, err
		case info.Name != r.Name:
			return driver.Found{}, fmt.Errorf("inspect by name answered with network %q", info.Name)
		}
		return driver.Found{ID: info.ID, Labels: info.Labels}, nil
	case campaign.KindDir:
		err := d.lstatRun(r.Name)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return driver.Found{Absent: true, Definite: true, Note: "never created: no such directory"}, nil
		case err != nil:
			return driver.Found{}, err
		}
		if !cleanup.RunDirShape(d.runBase(), r.Name) || instance == "" || filepath.Base(filepath.Dir(r.Name)) != runRootName(instance) {
			return driver.Found{Absent: true, Definite: true, Note: "never created by this generation: the path is not under its run root"}, nil
		}
		return driver.Found{ID: r.Name, Proven: true, Note: "resolved: the directory exists under this generation's run root"}, nil
	}
	return driver.Found{}, fmt.Errorf("unknown kind %q", r.Kind)
}

// Remove removes one journalled resource by its exact id: a container
// (forced, with its anonymous volumes), a network, or a run directory
// (relative to the runtime directory, following no link).
func (d *Driver) Remove(ctx context.Context, r campaign.Resource, _ cleanup.Observation) error {
	switch r.Kind {
	case campaign.KindContainer:
		return classify(d.api.ContainerRemove(ctx, r.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}))
	case campaign.KindNetwork:
		return classify(d.api.NetworkRemove(ctx, r.ID))
	case campaign.KindDir:
		return d.removeRun(r.ID)
	}
	return fmt.Errorf("unknown kind %q", r.Kind)
}
