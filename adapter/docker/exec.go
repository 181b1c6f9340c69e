package docker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// maxExecOutput bounds what an exec's stdout and stderr hold together.
const maxExecOutput = 1 << 20

// Exec runs cmd in the container with the given id and returns its exit
// code and output (at most 1 MiB). This is how the host reaches a server
// that publishes no port, and how the probes run. With opts.Stdin and
// opts.Stdout it streams (driver.ExecOptions).
func (d *Driver) Exec(ctx context.Context, id string, cmd []string, opts driver.ExecOptions) (driver.ExecResult, error) {
	code, out, err := d.exec(ctx, id, cmd, opts)
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
	return d.exec(ctx, id, cmd, driver.ExecOptions{Privileged: privileged})
}

// exec is execOutput with opts's stdin and streamed stdout: stdin is
// copied to the exec's attached connection, whose write side is closed at
// stdin's end (the command reads its end); stdout goes to opts.Stdout as
// the daemon sends it.
func (d *Driver) exec(ctx context.Context, id string, cmd []string, opts driver.ExecOptions) (int, driver.ExecResult, error) {
	api := d.api
	if c, ok := opts.Stdin.(io.Closer); ok {
		// Whatever stops the exec, a read of stdin that blocks ends.
		defer c.Close()
	}
	ex, err := api.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd, AttachStdin: opts.Stdin != nil, AttachStdout: true, AttachStderr: true, Privileged: opts.Privileged})
	if err != nil {
		return -1, driver.ExecResult{}, errorf("exec create in %s: %w", short(id), err)
	}
	att, err := api.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return -1, driver.ExecResult{}, errorf("exec attach in %s: %w", short(id), err)
	}
	var wg sync.WaitGroup
	defer func() {
		// The stdin copy ends: a read of stdin that blocks, by its close;
		// a write to the command, by the connection's.
		if c, ok := opts.Stdin.(io.Closer); ok {
			c.Close()
		}
		att.Close()
		wg.Wait()
	}()
	if opts.Stdin != nil {
		wg.Go(func() {
			// A failed write is the command gone: its exit says why.
			io.Copy(att.Conn, opts.Stdin)
			att.CloseWrite()
		})
	}
	var stdout, stderr bytes.Buffer
	var out io.Writer = &stdout
	if opts.Stdout != nil {
		out = opts.Stdout
	}
	result := func() driver.ExecResult { return driver.ExecResult{Stdout: stdout.String(), Stderr: stderr.String()} }
	done := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(out, &stderr, io.LimitReader(att.Reader, maxExecOutput))
		done <- err
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		att.Close()
		<-done
		return -1, result(), ctx.Err()
	}
	if err != nil {
		return -1, result(), fmt.Errorf("exec output in %s: %w", short(id), err)
	}
	insp, err := api.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		return -1, result(), errorf("exec inspect in %s: %w", short(id), err)
	}
	r := result()
	r.ExitCode = insp.ExitCode
	return insp.ExitCode, r, nil
}
