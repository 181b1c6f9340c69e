package docker

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/network"
)

// ContainerJSON returns the daemon's own inspect JSON of the container
// with the given id, as the daemon wrote it. An absent container is an
// error for which cerrdefs.IsNotFound is true.
func (d *Driver) ContainerJSON(ctx context.Context, id string) ([]byte, error) {
	_, raw, err := d.api.ContainerInspectWithRaw(ctx, id, false)
	if err != nil {
		return nil, fmt.Errorf("inspect container %s: %w", short(id), err)
	}
	return raw, nil
}

// NetworkJSON returns the daemon's own inspect JSON of the network with the
// given id. An absent network is an error for which cerrdefs.IsNotFound is
// true.
func (d *Driver) NetworkJSON(ctx context.Context, id string) ([]byte, error) {
	_, raw, err := d.api.NetworkInspectWithRaw(ctx, id, network.InspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("inspect network %s: %w", short(id), err)
	}
	return raw, nil
}
