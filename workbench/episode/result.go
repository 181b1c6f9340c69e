package episode

import "github.com/agentpen/agentpen/workbench/results"

// record hands the running episode's result to Config.OnEnd, once: it
// is called when an episode ends (finish), or when a reset or Close ends
// one that had not. end is one of results.Ends.
func (e *Environment) record(end string, parts results.Parts) {
	if e.task == nil || e.recorded || e.cfg.OnEnd == nil {
		return
	}
	if e.unrecorded && (end == results.EndAbandoned || end == results.EndClosed) {
		return
	}
	e.recorded = true
	e.cfg.OnEnd(results.Record{
		V:         results.Version,
		EpisodeID: e.state.EpisodeID,
		TaskID:    e.task.TaskID,
		Domain:    e.task.Domain,
		Reward:    e.reward,
		Parts:     parts,
		Steps:     e.state.StepCount,
		End:       end,
		StartedAt: e.started,
		EndedAt:   e.cfg.now(),
		Reason:    e.voidReason(end),
		Runs:      e.stops.runs,
		Stop:      e.stops.last,
	})
}

// Unrecorded keeps the running episode out of Config.OnEnd unless it
// ends on its own (graded, out of steps, finished): a reset or Close
// after it records nothing. The stateless HTTP routes call it: their
// environment lives for one request, so closing it ends no episode a
// trainer follows (a health check, an attestation probe).
func (e *Environment) Unrecorded() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.unrecorded = true
}

// voidReason is the record's reason: why grading failed, on an EndError
// record only.
func (e *Environment) voidReason(end string) string {
	if end != results.EndError {
		return ""
	}
	return e.void
}
