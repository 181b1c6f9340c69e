package adapter

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// Exec runs cmd in the container with the given id and returns its exit
// code and combined output (at most 1 MiB). This is how the host reaches a
// server that publishes no port.
func (a *Adapter) Exec(ctx context.Context, id string, cmd []string) (int, string, error) {
	api := a.api()
	ex, err := api.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return -1, "", fmt.Errorf("exec create in %s: %w", short(id), err)
	}
	att, err := api.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return -1, "", fmt.Errorf("exec attach in %s: %w", short(id), err)
	}
	defer att.Close()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(&out, &out, io.LimitReader(att.Reader, 1<<20))
		done <- err
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		att.Close()
		<-done
		return -1, out.String(), ctx.Err()
	}
	if err != nil {
		return -1, out.String(), fmt.Errorf("exec output in %s: %w", short(id), err)
	}
	insp, err := api.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		return -1, out.String(), fmt.Errorf("exec inspect in %s: %w", short(id), err)
	}
	return insp.ExitCode, out.String(), nil
}
