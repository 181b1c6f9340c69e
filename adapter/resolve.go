package adapter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
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
	g.SetLimit(a.removeParallelism())
	for _, gen := range gens {
		if !inScope(gen.N) {
			continue
		}
		for _, r := range gen.Live() {
			if r.ID != "" {
				continue
			}
			g.Go(func() error {
				f, known := failed[r.Name]
				res := a.resolve(ctx, r, gen.Instance, settledAfter(r, f, known))
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

// resolve finds out whether a create of r's name that was never recorded
// made a resource, asking the runtime by exact name until the answer is
// definitive. A resource with that name carrying r's ownership labels
// (the create's secret among them) is ours; one without them is not, and
// our create cannot have made it; "no such resource" counts only once no
// create can still be in flight (settled; at once where the runtime makes
// the kind synchronously). instance is the nonce of r's generation.
func (a *Adapter) resolve(ctx context.Context, r campaign.Resource, instance string, settled time.Time) resolution {
	delay := 50 * time.Millisecond
	var last error
	for {
		f, err := a.Driver.Lookup(ctx, r, instance)
		switch {
		case err != nil:
			last = err
		case !f.Absent && (f.Proven || campaign.OwnedBy(f.Labels, r.Labels)):
			return resolution{id: f.ID, note: or(f.Note, "resolved by name and ownership labels")}
		case !f.Absent:
			return resolution{absent: true, note: fmt.Sprintf("never created: the name belongs to %s, which is not ours", short(f.ID))}
		case f.Definite || !time.Now().Before(settled):
			return resolution{absent: true, note: or(f.Note, fmt.Sprintf("never created: no such %s once no create could be in flight", r.Kind))}
		default:
			last = fmt.Errorf("no such %s yet, but a create may still be in flight", r.Kind)
		}
		select {
		case <-ctx.Done():
			return resolution{err: fmt.Errorf("resolve %s %s: %w (last: %v)", r.Kind, r.Name, ctx.Err(), last)}
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
