package docker

import (
	"errors"
	"fmt"

	"github.com/agentpen/agentpen/adapter/driver"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"
)

// kinded is an SDK error with the driver's kind of it: it reads as the
// SDK's error and is both (errors.Is).
type kinded struct {
	kind, err error
}

func (e *kinded) Error() string   { return e.err.Error() }
func (e *kinded) Unwrap() []error { return []error{e.kind, e.err} }

// classify gives an error of a daemon call the driver's kind
// (package adapter/driver): NotFound, a name taken (Conflict), another
// answer of the daemon's own (an error status), or a daemon that did not
// answer at all. A call that ended without an answer (cancelled, cut)
// keeps no kind: the daemon may still carry it out.
func classify(err error) error {
	var k error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, driver.ErrNotFound), errors.Is(err, driver.ErrNameTaken), errors.Is(err, driver.ErrRefused), errors.Is(err, driver.ErrUnreachable):
		return err
	case cerrdefs.IsNotFound(err):
		k = driver.ErrNotFound
	case cerrdefs.IsConflict(err):
		k = driver.ErrNameTaken
	case cerrdefs.IsInvalidArgument(err) || cerrdefs.IsPermissionDenied(err) || cerrdefs.IsInternal(err) || cerrdefs.IsUnavailable(err) ||
		cerrdefs.IsNotImplemented(err) || cerrdefs.IsUnknown(err):
		k = driver.ErrRefused
	case client.IsErrConnectionFailed(err):
		return fmt.Errorf("%w: %w", ErrDaemonUnreachable, err)
	default:
		return err
	}
	return &kinded{k, err}
}

// errorf is fmt.Errorf of a daemon call's error, classified.
func errorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return classify(err)
}
