package adapter

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"
	"github.com/agentpen/agentpen/workbench/results"
)

// ResultsCollector moves the episode results the workspaces' workbenches
// append to their run directories (package workbench/results) into the
// campaign's results file (store.ResultsFile), where they outlive the
// campaign.
//
// A workspace's results file is written where a container escape reaches
// (a Docker workspace's run directory is the daemon user's): every byte
// read there is hostile. The driver reads it without following a link or
// blocking (driver.Workspaces.Results), at most results.MaxFile bytes are
// read per collection, every line is parsed strictly, and a record naming
// another task than the workspace's is refused. A refused line is logged (its offset and why, never its
// content) and skipped, never stored. Only workspaces running the
// workbench are read: a launcher's own command writes no results.
//
// Two collectors of the same campaign, in one process or two, take turns
// on the campaign's results file lock; the offsets collection resumes
// from are read from that file, so nothing is stored twice. A collector
// remembers them between collections while the file does not change
// under it; after a restart it reads them again (and logs a refused line
// at the end of a workspace's file once more).
type ResultsCollector struct {
	a    *Adapter
	now  func() time.Time
	mu   sync.Mutex
	seen map[string]seenResults
}

type seenResults struct {
	size int64
	next map[store.Source]int64
}

// CollectResults collects c's new results with the adapter's own
// collector (made at the first call).
func (a *Adapter) CollectResults(c *store.Campaign) (Collected, error) {
	a.resultsOnce.Do(func() { a.results = a.NewResultsCollector() })
	return a.results.Collect(c)
}

// NewResultsCollector returns a collector for a's campaigns.
func (a *Adapter) NewResultsCollector() *ResultsCollector {
	return &ResultsCollector{a: a, now: time.Now, seen: map[string]seenResults{}}
}

// Collected is what one collection did.
type Collected struct {
	// New is how many records were stored; Records are they.
	New     int
	Records []store.Result
	// Refused are the lines refused, by workspace.
	Refused []RefusedResult
}

// RefusedResult is one refused line of a workspace's results file, or
// the file itself (Offset -1).
type RefusedResult struct {
	Workspace int
	Offset    int64
	Reason    string
}

// Collect collects the latest generation's workspaces' new results into
// c's results file.
func (rc *ResultsCollector) Collect(c *store.Campaign) (Collected, error) {
	var out Collected
	st, err := c.Read()
	if err != nil {
		return out, err
	}
	gen := st.Latest().N
	ws, err := rc.a.Workspaces(c, st)
	if err != nil || len(ws) == 0 {
		return out, err
	}
	log, err := c.OpenResultsLog()
	if err != nil {
		return out, err
	}
	defer log.Close()
	size, err := log.Size()
	if err != nil {
		return out, err
	}
	rc.mu.Lock()
	seen, ok := rc.seen[c.ID]
	rc.mu.Unlock()
	if !ok || seen.size != size {
		next, err := log.Offsets()
		if err != nil {
			return out, err
		}
		seen = seenResults{size: size, next: next}
	}
	recs, _, err := c.Records()
	if err != nil {
		return out, err
	}
	covered := coveringAttestations(recs, gen)
	var add []store.Result
	for _, w := range ws {
		if !w.Workbench {
			continue
		}
		k := store.Source{Generation: gen, Workspace: w.Index}
		recs, next, refused, err := rc.read(w, seen.next[k])
		for _, r := range refused {
			rc.a.log().Warn("results: a line refused", "campaign", c.ID, "workspace", w.Index, "offset", r.Offset, "reason", r.Reason)
			out.Refused = append(out.Refused, RefusedResult{w.Index, r.Offset, r.Reason})
		}
		if err != nil {
			rc.a.log().Warn("results: a workspace's results file refused", "campaign", c.ID, "workspace", w.Index, "err", err)
			out.Refused = append(out.Refused, RefusedResult{w.Index, -1, err.Error()})
			continue
		}
		at := rc.now().UTC()
		for _, r := range recs {
			if r.TaskID != w.TaskID {
				rc.a.log().Warn("results: a record of another task refused", "campaign", c.ID, "workspace", w.Index)
				out.Refused = append(out.Refused, RefusedResult{w.Index, next, "a record of a task other than the workspace's"})
				continue
			}
			add = append(add, store.Result{Generation: gen, Workspace: w.Index, AgentID: w.AgentID, Record: r, SourceEnd: next, CollectedAt: at,
				Attestation: covered[w.AgentID]})
		}
		seen.next[k] = next
	}
	if err := log.Append(add); err != nil {
		return out, err
	}
	out.New, out.Records = len(add), add
	if size, err := log.Size(); err == nil {
		seen.size = size
		rc.mu.Lock()
		rc.seen[c.ID] = seen
		rc.mu.Unlock()
	}
	return out, nil
}

// read reads w's results file from offset; a missing file is nothing to
// read.
func (rc *ResultsCollector) read(w Workspace, offset int64) ([]results.Record, int64, []results.Refusal, error) {
	b, err := rc.a.Driver.Results(context.Background(), w.Handle, offset)
	if err != nil {
		return nil, offset, nil, err
	}
	recs, next, refused := results.Lines(b, offset)
	return recs, next, refused, nil
}

// coveringAttestations are, by agent id, the digests of the latest
// passing attestation of generation gen that covered each workspace: one
// of the whole campaign, or of a refill naming its pool slot, recorded
// after its container's intent (a container made again is not covered by
// what came before it), and with no failed verdict after it.
func coveringAttestations(recs []campaign.Record, gen int) map[string]string {
	slots := map[string]int{} // agent id -> its pool slot, -1 for none
	out := map[string]string{}
	for _, r := range recs {
		if r.Gen != gen {
			continue
		}
		switch {
		case r.Op == campaign.OpIntent && r.Kind == campaign.KindContainer && r.Labels[campaign.LabelAgent] != "":
			agent, slot := r.Labels[campaign.LabelAgent], -1
			if s, err := strconv.Atoi(r.Labels[campaign.LabelPoolSlot]); err == nil {
				slot = s
			}
			slots[agent] = slot
			delete(out, agent)
		case r.Op == campaign.OpAttested && r.Status != campaign.AttestOK:
			// A failed verdict fails the campaign closed (campaign.Fold):
			// no workspace of it runs under a passing attestation since.
			clear(out)
		case r.Op == campaign.OpAttested && r.Digest != "":
			for agent, slot := range slots {
				if len(r.Slots) == 0 || slices.Contains(r.Slots, slot) {
					out[agent] = r.Digest
				}
			}
		}
	}
	return out
}
