package docker

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// Exec runs cmd in the container with the given id and returns its exit
// code and output (at most 1 MiB). This is how the host reaches a server
// that publishes no port, and how the probes run.
func (d *Driver) Exec(ctx context.Context, id string, cmd []string, opts driver.ExecOptions) (driver.ExecResult, error) {
	code, out, err := d.execOutput(ctx, id, cmd, opts.Privileged)
	out.ExitCode = code
	return out, err
}

// execOutput runs cmd in the container and returns its exit code, stdout
// and stderr (at most 1 MiB together). A privileged exec holds every
// capability of the container's user namespace (never more than the
// rootless daemon's user has on the host): the attestation's probe needs
// CAP_SYS_PTRACE to read /proc/PID/fd, exe and cwd of a server that made
// itself non-dumpable (any credential switch on one of its threads does).
func (d *Driver) execOutput(ctx context.Context, id string, cmd []string, privileged bool) (int, driver.ExecResult, error) {
	api := d.api
	ex, err := api.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true, Privileged: privileged})
	if err != nil {
		return -1, driver.ExecResult{}, errorf("exec create in %s: %w", short(id), err)
	}
	att, err := api.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return -1, driver.ExecResult{}, errorf("exec attach in %s: %w", short(id), err)
	}
	defer att.Close()
	var stdout, stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(&stdout, &stderr, io.LimitReader(att.Reader, 1<<20))
		done <- err
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		att.Close()
		<-done
		return -1, driver.ExecResult{Stdout: stdout.String(), Stderr: stderr.String()}, ctx.Err()
	}
	if err != nil {
		return -1, driver.ExecResult{Stdout: stdout.String(), Stderr: stderr.String()}, fmt.Errorf("exec output in %s: %w", short(id), err)
	}
	insp, err := api.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		return -1, driver.ExecResult{Stdout: stdout.String(), Stderr: stderr.String()}, errorf("exec inspect in %s: %w", short(id), err)
	}
	return insp.ExitCode, driver.ExecResult{ExitCode: insp.ExitCode, Stdout: stdout.String(), Stderr: stderr.String()}, nil
}
