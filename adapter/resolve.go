package adapter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"
	"golang.org/x/sync/errgroup"
)

// resolution is what resolving an intent found.
type resolution struct {
	// id is the id of the resource that holds the intent's name and
	// carries its ownership labels: it is ours, and journalled as created.
	id   string
	note string
	// absent: confirmed never created (or not ours); journalled resolved.
	absent bool
	// err: no definitive answer before ctx was done.
	err error
}

// resolveIntents resolves every intent in scope whose create outcome was
// never recorded: by exact name and ownership labels (the instance nonce
// among them), retrying until the daemon answers definitively. It journals
// each answer and returns the intents it could not resolve.
func (a *Adapter) resolveIntents(ctx context.Context, j *campaign.Journal, gens []campaign.Generation, inScope func(int) bool, failed map[string]failedCreate) []cleanup.Unresolved {
	var mu sync.Mutex
	var out []cleanup.Unresolved
	g := new(errgroup.Group)
	g.SetLimit(DefaultRemoveParallelism)
	for _, gen := range gens {
		if !inScope(gen.N) {
			continue
		}
		for _, r := range gen.Live() {
			if r.ID != "" {
				continue
			}
			g.Go(func() error {
				var res resolution
				f, known := failed[r.Name]
				switch r.Kind {
				case campaign.KindContainer:
					res = a.resolveContainer(ctx, r, settledAfter(r, f, known))
				case campaign.KindNetwork:
					res = a.resolveNetwork(ctx, r, settledAfter(r, f, known))
				case campaign.KindDir:
					res = a.resolveDir(r, gen)
				default:
					res.err = fmt.Errorf("unknown kind %q", r.Kind)
				}
				var jerr error
				switch {
				case res.id != "":
					jerr = j.Append(campaign.Record{Op: campaign.OpCreated, Gen: r.Gen, Kind: r.Kind, Role: r.Role, Name: r.Name, ID: res.id, Note: res.note})
				case res.absent:
					jerr = j.Append(campaign.Record{Op: campaign.OpRemoved, Gen: r.Gen, Kind: r.Kind, Role: r.Role, Name: r.Name, Note: res.note})
				}
				if err := errors.Join(res.err, jerr); err != nil {
					mu.Lock()
					out = append(out, cleanup.Unresolved{Resource: r, Reason: err.Error()})
					mu.Unlock()
				}
				return nil
			})
		}
	}
	g.Wait()
	return out
}

// failedCreate is a create of this process's bring-up that returned an
// error: when it returned, and whether the daemon answered (an error
// status) or the call ended without an answer (cancelled, timed out,
// connection lost), in which case the daemon may still carry it out.
type failedCreate struct {
	at       time.Time
	answered bool
}

// daemonAnswered reports whether err is the daemon's own answer to a call
// (an error status it sent), as opposed to a call that ended without one.
func daemonAnswered(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return cerrdefs.IsInvalidArgument(err) || cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err) ||
		cerrdefs.IsPermissionDenied(err) || cerrdefs.IsInternal(err) || cerrdefs.IsUnavailable(err) ||
		cerrdefs.IsNotImplemented(err) || cerrdefs.IsUnknown(err)
}

// settledAfter is when "no such <resource>" becomes a definitive answer
// for an intent: at once when the daemon answered the create with an
// error; resolveSettle after a create of this process that ended without
// an answer (a request the daemon had not yet read can still be carried
// out: this is the window); resolveSettle after the intent for an intent
// of another process (a crash).
func settledAfter(r campaign.Resource, f failedCreate, known bool) time.Time {
	switch {
	case known && f.answered:
		return time.Time{}
	case known:
		return f.at.Add(resolveSettle)
	}
	return r.Intended.Add(resolveSettle)
}

// resolveContainer finds out whether a create of r's name that was never
// recorded made a container, asking by exact name until the answer is
// definitive. A container with that name carrying r's ownership labels
// (the instance nonce among them) is ours; one without them is not, and
// our create cannot have made it; "no such container" counts only once no
// create can still be in flight (settledAfter).
func (a *Adapter) resolveContainer(ctx context.Context, r campaign.Resource, settled time.Time) resolution {
	delay := 50 * time.Millisecond
	var last error
	for {
		info, err := a.api().ContainerInspect(ctx, r.Name)
		switch {
		case err == nil:
			if info.Config != nil && campaign.OwnedBy(info.Config.Labels, r.Labels) {
				return resolution{id: info.ID, note: "resolved by name and ownership labels"}
			}
			return resolution{absent: true, note: fmt.Sprintf("never created: the name belongs to %s, which is not ours", short(info.ID))}
		case !cerrdefs.IsNotFound(err):
			last = err
		case !time.Now().Before(settled):
			return resolution{absent: true, note: "never created: no such container once no create could be in flight"}
		default:
			last = errors.New("no such container yet, but a create may still be in flight")
		}
		select {
		case <-ctx.Done():
			return resolution{err: fmt.Errorf("resolve container %s: %w (last: %v)", r.Name, ctx.Err(), last)}
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// resolveNetwork is resolveContainer for the campaign network.
func (a *Adapter) resolveNetwork(ctx context.Context, r campaign.Resource, settled time.Time) resolution {
	delay := 50 * time.Millisecond
	var last error
	for {
		info, err := a.api().NetworkInspect(ctx, r.Name, network.InspectOptions{})
		switch {
		case err == nil && info.Name == r.Name:
			if campaign.OwnedBy(info.Labels, r.Labels) {
				return resolution{id: info.ID, note: "resolved by name and ownership labels"}
			}
			return resolution{absent: true, note: fmt.Sprintf("never created: the name belongs to %s, which is not ours", short(info.ID))}
		case err == nil:
			last = fmt.Errorf("inspect by name answered with network %q", info.Name)
		case !cerrdefs.IsNotFound(err):
			last = err
		case !time.Now().Before(settled):
			return resolution{absent: true, note: "never created: no such network once no create could be in flight"}
		default:
			last = errors.New("no such network yet, but a create may still be in flight")
		}
		select {
		case <-ctx.Done():
			return resolution{err: fmt.Errorf("resolve network %s: %w (last: %v)", r.Name, ctx.Err(), last)}
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// resolveDir resolves a run directory whose creation was never recorded:
// agentpen makes it with one mkdir, so it exists or it does not; one that
// exists is ours when its path is a run directory under this generation's
// own run root (named with the instance nonce).
func (a *Adapter) resolveDir(r campaign.Resource, g campaign.Generation) resolution {
	err := a.lstatRun(r.Name)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return resolution{absent: true, note: "never created: no such directory"}
	case err != nil:
		return resolution{err: err}
	}
	if !cleanup.RunDirShape(a.runBase(), r.Name) || g.Instance == "" || filepath.Base(filepath.Dir(r.Name)) != runRootName(g.Instance) {
		return resolution{absent: true, note: "never created by this generation: the path is not under its run root"}
	}
	return resolution{id: r.Name, note: "resolved: the directory exists under this generation's run root"}
}
