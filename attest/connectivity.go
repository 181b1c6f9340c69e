package attest

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/workbench/probe/wire"
)

// gathered is what the probe runs returned, by probe id, and why an exec
// gave none.
type gathered struct {
	results map[string]wire.Outcome
	execErr map[string]string // phase/subject -> why
}

func gather(plan *probePlan, obs Observation) gathered {
	ev := gathered{results: map[string]wire.Outcome{}, execErr: map[string]string{}}
	runs := map[string]ProbeRun{}
	for _, run := range obs.Runs {
		runs[run.Phase+"/"+run.Subject] = run
	}
	for _, x := range plan.execs() {
		key := x.Phase + "/" + x.Subject
		run, ok := runs[key]
		switch {
		case x.ContainerID == "":
			ev.execErr[key] = "no journalled container to probe in"
		case !ok:
			ev.execErr[key] = "the probe exec was not run"
		case run.Err != "":
			ev.execErr[key] = "the probe exec failed: " + run.Err
		case run.ExitCode != 0:
			ev.execErr[key] = fmt.Sprintf("the probe exited %d: %s", run.ExitCode, clip(strings.TrimSpace(run.Stdout), 200))
		default:
			out, err := decodeProbeOutput(run.Stdout)
			if err != nil {
				ev.execErr[key] = err.Error()
				continue
			}
			// The output must come from the container probed (the id the
			// probe read from its own mounts), and name each probe once.
			if out.ContainerID != x.ContainerID {
				ev.execErr[key] = fmt.Sprintf("the probe output comes from container %q, not the journalled %s", short(out.ContainerID), short(x.ContainerID))
				continue
			}
			seen := map[string]bool{}
			for _, res := range out.Results {
				if seen[res.ID] {
					ev.execErr[key] = "the probe output names " + res.ID + " twice"
					break
				}
				seen[res.ID] = true
				ev.results[key+"|"+res.ID] = res
			}
		}
	}
	return ev
}

// result is the probe's result, or why there is none.
func (ev gathered) result(pr probe) (wire.Outcome, string) {
	key := pr.phase + "/" + pr.subject
	if why := ev.execErr[key]; why != "" {
		return wire.Outcome{}, why
	}
	res, ok := ev.results[key+"|"+pr.req.ID]
	if !ok {
		return wire.Outcome{}, "the probe returned no result for " + pr.req.ID
	}
	if res.Kind != pr.req.Kind {
		return wire.Outcome{}, fmt.Sprintf("result of kind %q for a %s probe", res.Kind, pr.req.Kind)
	}
	return res, ""
}

var unreachableOutcomes = []string{"timeout", "refused", "unreachable", "dns"}

func wantText(pr probe) string {
	if pr.want == "status" {
		return fmt.Sprintf("status %d", pr.status)
	}
	return pr.want
}

// judge says whether one connectivity probe found what it must.
func judge(pr probe, res wire.Outcome) (bool, string) {
	switch pr.want {
	case wantConnected:
		return res.Outcome == "connected", "not connected: " + res.Outcome
	case wantUnreachable:
		return slices.Contains(unreachableOutcomes, res.Outcome), "reachable, or no definite answer: " + res.Outcome
	case wantNoPath:
		return res.Outcome == "timeout" || res.Outcome == "unreachable", "a path exists (a refusal is an answer), or no definite answer: " + res.Outcome
	case wantDenied:
		return res.Outcome == "denied", "not denied: " + res.Outcome
	case wantLoopbackOnly:
		return res.Outcome == "found" && slices.Equal(res.Interfaces, []string{"lo"}), "interfaces: " + strings.Join(res.Interfaces, ", ") + " " + res.Error
	case wantIsolated:
		return judgeIsolation(pr, res)
	case wantEpisodeUID:
		i := res.Isolation
		if res.Outcome != "found" || i == nil {
			return false, "no finding: " + res.Outcome + " " + res.Error
		}
		ok := pr.uid != 0 && i.EpisodeUID >= pr.uid && i.EpisodeUID < pr.uid+campaign.UIDBlockSize
		return ok, fmt.Sprintf("code run as an episode ran as uid %d, the journal's block is %d..+%d", i.EpisodeUID, pr.uid, campaign.UIDBlockSize)
	case wantGitClean:
		return judgeGit(pr, res)
	case wantUnreadable:
		return res.Outcome == wire.OutcomeDenied || res.Outcome == wire.OutcomeNotFound, "the agent's uid: " + strings.TrimSpace(res.Outcome+" "+res.Error)
	case wantUIDBlock:
		ok := pr.uid != 0 && res.Outcome == "found" && res.UIDBase == pr.uid && res.UIDCount == campaign.UIDBlockSize
		return ok, fmt.Sprintf("the episode server runs uids %d..+%d, the journal says %d..+%d (%s %s)", res.UIDBase, res.UIDCount, pr.uid, campaign.UIDBlockSize, res.Outcome, res.Error)
	case wantNoBindFile:
		// Root's lstat found nothing (no file), and the uid's open was
		// refused by the directory or found nothing: never an error.
		ok := res.File == nil && (res.Outcome == wire.OutcomeNotFound || res.Outcome == "denied")
		return ok, fmt.Sprintf("the uid's open: %s; as root: a file %v (want no file: an unclaimed pooled workspace is bound to no task)", res.Outcome, res.File != nil)
	case wantBindFile:
		if res.File == nil {
			return false, "no bind file: " + res.Outcome + " " + res.Error
		}
		f := res.File
		ok := res.Outcome == "denied" && f.Regular && f.Mode == "0400" && f.UID == 0
		return ok, fmt.Sprintf("the uid's open: %s; as root: regular %v, mode %s, uid %d (want denied, a regular file, 0400, uid 0)", res.Outcome, f.Regular, f.Mode, f.UID)
	case "status":
		return res.Outcome == "reply" && res.Status == pr.status, fmt.Sprintf("outcome %s, status %d", res.Outcome, res.Status)
	case wantNoSocket:
		for _, s := range res.Sockets {
			if s.IsSocket || s.How == "env" {
				return false, "a Docker socket (or DOCKER_HOST) is visible at " + s.Path
			}
		}
		return res.Outcome == "none", "outcome " + res.Outcome
	case wantSocket:
		var socks []string
		for _, s := range res.Sockets {
			if s.IsSocket {
				socks = append(socks, s.Path)
			}
		}
		return slices.Equal(socks, []string{campaign.DockerSocketTarget}), "sockets visible: " + strings.Join(socks, ", ")
	}
	return false, "unknown expectation " + pr.want
}

// judgeGit: the git probe audited every repository it found, none
// holds anything past its base, and each declared repository was audited
// against its declared base; the reason names each leak (its repository,
// vector and name, the first few) or why there is no verdict.
func judgeGit(pr probe, res wire.Outcome) (bool, string) {
	var why []string
	audited := map[string]wire.GitAudit{}
	for _, a := range res.Git {
		audited[a.Path] = a
		switch {
		case a.Error != "":
			why = append(why, a.Path+": not audited: "+a.Error)
		case a.Cached && (a.StateKey == "" || pr.req.GitKnown[a.Path] != a.StateKey):
			why = append(why, a.Path+": said cached under a state key it was not given")
		case a.LeakCount > 0 || len(a.Leaks) > 0:
			var ls []string
			for _, l := range a.Leaks[:min(len(a.Leaks), 5)] {
				ls = append(ls, l.Kind+" "+l.Class+" "+l.Name)
			}
			why = append(why, fmt.Sprintf("%s: %d past base %s (%s): %s", a.Path, a.LeakCount, a.Base, a.BaseFrom, strings.Join(ls, ", ")))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(pr.req.Bases)) {
		if a, ok := audited[p]; !ok || a.Error == "" && (a.BaseFrom != "declared" || a.Base != pr.req.Bases[p]) {
			why = append(why, fmt.Sprintf("%s: not audited against its declared base %s", p, pr.req.Bases[p]))
		}
	}
	if res.Outcome != wire.OutcomeClean && len(why) == 0 || res.Outcome == wire.OutcomeError && res.Error != "" {
		why = append(why, strings.TrimSpace(res.Outcome+" "+res.Error))
	}
	if len(why) == 0 {
		return true, ""
	}
	return false, "history past the base, or no verdict: " + strings.Join(why, "; ")
}

// fromCache is a git probe's audits with each one it found unchanged
// (Cached, under the state key it was given) replaced by the earlier
// audit it stands for, still marked Cached.
func fromCache(pr probe, audits []wire.GitAudit, cache GitCache) []wire.GitAudit {
	out := slices.Clone(audits)
	for i, a := range out {
		if !a.Cached || a.StateKey == "" || pr.req.GitKnown[a.Path] != a.StateKey {
			continue
		}
		for _, c := range cache[pr.cacheKey] {
			if c.Path == a.Path && c.StateKey == a.StateKey {
				out[i] = c
				out[i].Cached = true
			}
		}
	}
	return out
}

// judgeIsolation: the episode ran in PID and network namespaces other
// than its server's (both named), with the loopback interface alone, and
// could not open a vsock socket.
func judgeIsolation(pr probe, res wire.Outcome) (bool, string) {
	i := res.Isolation
	if res.Outcome != "found" || i == nil {
		return false, "no finding: " + res.Outcome + " " + res.Error
	}
	var why []string
	// A probe that does not say read the serving process (a workbench
	// before wire.Request.SelfNS).
	if from, got := map[bool]string{false: "process", true: "exec"}[pr.req.SelfNS], cmp.Or(i.ServerFrom, "process"); got != from {
		why = append(why, fmt.Sprintf("the server's namespaces were read from %q, not the %q asked", got, from))
	}
	if i.Sandbox == "uid-only" {
		why = append(why, "the workbench runs the uid-only sandbox, which is weaker (episode code in the server's namespaces)")
	}
	if i.EpisodePidNS == "" || i.ServerPidNS == "" || i.EpisodePidNS == i.ServerPidNS {
		why = append(why, fmt.Sprintf("PID namespace %q, the server's %q", i.EpisodePidNS, i.ServerPidNS))
	}
	if i.EpisodeNetNS == "" || i.ServerNetNS == "" || i.EpisodeNetNS == i.ServerNetNS {
		why = append(why, fmt.Sprintf("network namespace %q, the server's %q", i.EpisodeNetNS, i.ServerNetNS))
	}
	if !slices.Equal(i.Interfaces, []string{"lo"}) {
		why = append(why, "interfaces: "+strings.Join(i.Interfaces, ", "))
	}
	if !strings.HasPrefix(i.VSock, "denied") {
		why = append(why, "vsock: "+i.VSock)
	}
	return len(why) == 0, "episode code is not isolated: " + strings.Join(why, "; ")
}

func checkProbes(r *Report, e *expectation, obs Observation, decoded map[string]*container) {
	plan := planProbes(e, obs.ProbeEnv, obs.Listeners)
	ev := gather(plan, obs)
	conn := &r.Connectivity
	conn.Probes = []ProbeRecord{}
	conn.Listeners = append([]Listener{}, obs.Listeners...)
	conn.Egress = Egress{Policy: string(e.Egress), Target: obs.ProbeEnv.EgressTarget, Probed: obs.ProbeEnv.EgressTarget != ""}
	if conn.Egress.Probed {
		conn.Egress.AttestedFrom = "a probe of " + obs.ProbeEnv.EgressTarget + " from every workspace, and the network's Internal flag"
	} else {
		conn.Egress.AttestedFrom = "the network's Internal flag alone: no egress target was configured, so no egress probe ran"
	}
	if e.GraderRoutes && plan.scoped() {
		conn.ProtectedRoutes = "probed without the key from the refill's pooled workspaces; the grader's counters were not read (claimed workspaces may be grading)"
	} else if e.GraderRoutes {
		conn.ProtectedRoutes = "probed without the key from every workspace; the grader's counters were read before and after"
	} else {
		conn.ProtectedRoutes = "not probed: the server runs a launcher's command, not the workbench grader, and its protected routes are unknown to agentpen"
	}

	// On a cluster the probes reach the grader by its pod's address: the
	// one the API server answers now, or the control proves nothing.
	misdirected := ""
	if e.Cluster {
		if want := (&Expectation{e}).ServerAddr(obs); want == "" || obs.ProbeEnv.ServerAddr != want {
			misdirected = fmt.Sprintf("the probes were sent to %q, not the grader pod's address the API server reports (%q)", obs.ProbeEnv.ServerAddr, want)
		}
	}
	controlOK := map[string]bool{}
	for _, pr := range plan.probes {
		if pr.control {
			res, why := ev.result(pr)
			controlOK[pr.phase+"/"+pr.subject] = why == "" && res.Outcome == "connected" && misdirected == ""
		}
	}
	type agg struct {
		recs    []ProbeRecord
		pass    bool
		reasons []string
		want    string
	}
	checks := map[string]*agg{}
	record := func(pr probe, rec ProbeRecord, pass bool, why string) {
		rec.Pass = pass
		conn.Probes = append(conn.Probes, rec)
		a := checks[pr.check]
		if a == nil {
			a = &agg{pass: true, want: wantText(pr)}
			checks[pr.check] = a
		}
		a.recs = append(a.recs, rec)
		if !pass {
			a.pass = false
			a.reasons = append(a.reasons, pr.target+": "+why)
		}
	}
	var counters, drops, routes []probe
	refused := map[string]bool{} // subject -> its metadata stand-in was shown unreachable
	for _, pr := range plan.probes {
		switch pr.want {
		case wantProcess:
			checkCustody(r, e, obs, decoded, pr, ev)
			continue
		case wantCounters:
			counters = append(counters, pr)
			continue
		case wantPolicyDrop:
			drops = append(drops, pr)
			continue
		case wantMetadataRoute, wantRouteRef:
			routes = append(routes, pr)
			continue
		}
		rec := ProbeRecord{ID: pr.req.ID, Check: pr.check, Target: pr.target, Want: wantText(pr)}
		res, why := ev.result(pr)
		pass := false
		if why == "" {
			if pr.want == wantGitClean {
				res.Git = fromCache(pr, res.Git, plan.env.GitCache)
			}
			rec.Outcome, rec.Status, rec.Error, rec.LatencyMS, rec.Isolation = res.Outcome, res.Status, res.Error, res.LatencyMS, res.Isolation
			rec.Git, rec.CacheKey = res.Git, pr.cacheKey
			pass, why = judge(pr, res)
			if pass && pr.control && misdirected != "" {
				pass, why = false, misdirected
			}
			if pass {
				why = ""
			}
		}
		if pass && pr.negative && !controlOK[pr.phase+"/"+pr.subject] {
			pass, why = false, "the positive control in the same exec failed: a refusal or a timeout there is no evidence"
		}
		if pr.canary == campaign.EgressMetadata && pass {
			refused[pr.subject] = true
		}
		record(pr, rec, pass, why)
	}
	judgeMetadataRoutes(routes, ev, refused, record)
	for _, n := range plan.notes {
		a := checks[n.check]
		if a == nil {
			a = &agg{pass: true, want: wantUnreachable}
			checks[n.check] = a
		}
		if !n.pass {
			a.pass, a.reasons = false, append(a.reasons, n.why)
		}
	}
	// A stand-in that accepted a connection was reached, whatever the
	// probes said: every workspace probing its class fails.
	for _, l := range obs.Listeners {
		if l.Kind != ListenerCanary || l.Accepted == 0 {
			continue
		}
		for _, pr := range plan.probes {
			if a := checks[pr.check]; pr.canary == l.Class && a != nil {
				a.pass = false
				if why := fmt.Sprintf("the %s stand-in at %s accepted %d connection(s)", l.Class, l.Addr, l.Accepted); !slices.Contains(a.reasons, why) {
					a.reasons = append(a.reasons, why)
				}
			}
		}
	}
	for name, a := range checks {
		obsv := make([]map[string]any, 0, len(a.recs))
		for _, rec := range a.recs {
			m := map[string]any{"target": rec.Target, "outcome": rec.Outcome}
			if rec.Status != 0 {
				m["status"] = rec.Status
			}
			if rec.Want == wantGitClean {
				m["repositories"] = gitSummary(rec.Git)
			}
			obsv = append(obsv, m)
		}
		conn.add(name, obsv, a.want, a.pass, strings.Join(a.reasons, "; "))
	}
	checkCounters(r, e, plan, ev, counters)
	checkListeners(r, obs)
	if e.Cluster {
		r.NetworkPolicies = policyEnforcement(conn, ev, drops, controlOK)
	}
}

// policyEnforcement says what the report's network_policies claims from
// the policy probes: enforced only when every workspace pod's connection
// to the grader pod on a port no policy allows went unanswered (dropped)
// beside its control's connection; not enforced when any was answered;
// stored, unproven, otherwise. The probes are recorded as evidence.
func policyEnforcement(conn *Connectivity, ev gathered, drops []probe, controlOK map[string]bool) string {
	var answered, unsure []string
	for _, pr := range drops {
		res, why := ev.result(pr)
		rec := ProbeRecord{ID: pr.req.ID, Check: pr.check, Target: pr.target, Want: "dropped (enforced) or answered (not enforced)",
			Outcome: res.Outcome, Error: res.Error, LatencyMS: res.LatencyMS}
		switch {
		case why != "":
			unsure = append(unsure, pr.subject+": "+why)
		case res.Outcome == "refused" || res.Outcome == "connected":
			answered = append(answered, pr.subject+" ("+res.Outcome+")")
			rec.Pass = true
		case (res.Outcome == "timeout" || res.Outcome == "unreachable") && controlOK[pr.phase+"/"+pr.subject]:
			rec.Pass = true
		default:
			unsure = append(unsure, pr.subject+": "+res.Outcome+", its control "+map[bool]string{true: "connected", false: "did not connect"}[controlOK[pr.phase+"/"+pr.subject]])
		}
		conn.Probes = append(conn.Probes, rec)
	}
	switch {
	case len(answered) > 0:
		return "stored, not enforced: a workspace's pod reached the grader pod on a port no policy allows (" + strings.Join(answered, ", ") + "): the cluster's network plugin does not enforce network policies"
	case len(drops) > 0 && len(unsure) == 0:
		return "enforced: every workspace's pod was denied the grader pod on a port no policy allows (its connection dropped), while its control connected"
	case len(drops) == 0:
		return "stored: no workspace to probe enforcement from"
	}
	return "stored: enforcement not proven (" + strings.Join(unsure, "; ") + ")"
}

func checkCustody(r *Report, e *expectation, obs Observation, decoded map[string]*container, pr probe, ev gathered) {
	var c *containerExp
	for i := range e.Containers {
		if e.Containers[i].Subject == pr.subject {
			c = &e.Containers[i]
		}
	}
	want := map[string]any{"serves": orMain(c.Serves)}
	res, why := ev.result(pr)
	if why == "" && (res.Outcome != "found" || res.Process == nil) {
		why = "no process found: " + res.Error
	}
	if why != "" {
		r.Custody.add(pr.check, nil, want, false, why)
		return
	}
	if e.Cluster {
		checkPodCustody(r, c, decoded[c.Subject], pr, res)
		return
	}
	p := res.Process
	observed := map[string]any{"pid": p.Pid, "argv_digest": p.ArgvDigest, "cwd": p.Cwd, "serves": p.Serves, "cap_bnd": p.CapBnd, "no_new_privs": p.NoNewPrivs}
	var problems []string
	if p.Pid <= 0 {
		problems = append(problems, "no pid")
	}
	if p.Serves != orMain(c.Serves) {
		problems = append(problems, "serves "+p.Serves)
	}
	d := decoded[c.Subject]
	img, imgOK := plannedImage(obs, c.Image)
	if imgOK {
		argv := append(slices.Clone(img.Entrypoint), c.Cmd...)
		cwd := img.WorkDir
		if cwd == "" {
			cwd = "/"
		}
		want["argv_digest"], want["cwd"] = argvDigest(argv), cwd
		if p.ArgvDigest != argvDigest(argv) {
			problems = append(problems, "another command line")
		}
		if p.Cwd != cwd {
			problems = append(problems, "another working directory")
		}
	} else {
		problems = append(problems, "the planned image was not observed: the planned command line is unknown")
	}
	nnpProblems, capProblems := processFlags(c, *p, want)
	problems = append(append(problems, nnpProblems...), capProblems...)
	// The container id is evidence: gather accepted this output only from
	// a probe whose own mounts name this container.
	rec := Process{Subject: c.Subject, ContainerID: c.ID, Pid: p.Pid, CommandDigest: p.ArgvDigest, Cwd: p.Cwd, Serves: p.Serves, Exe: p.Exe}
	if d != nil {
		rec.HostPid = d.Pid
	}
	r.Custody.Processes = append(r.Custody.Processes, rec)
	sort.Slice(r.Custody.Processes, func(i, j int) bool { return r.Custody.Processes[i].Subject < r.Custody.Processes[j].Subject })
	r.Custody.add(pr.check, observed, want, len(problems) == 0, strings.Join(problems, "; "))
}

// processFlags judges a process's no_new_privs and capability bounding
// set against the plan, filling want.
func processFlags(c *containerExp, p wire.Process, want map[string]any) (nnp, caps []string) {
	wantNNP, _ := splitNNP(c.Settings.SecurityOpt)
	want["no_new_privs"] = wantNNP
	if p.NoNewPrivs != wantNNP {
		nnp = append(nnp, "no_new_privs differs")
	}
	if !slices.Contains(normCaps(c.Settings.CapDrop), "ALL") {
		return nnp, []string{"the plan does not drop ALL capabilities: the bounding set is not known"}
	}
	mask, ok := capMask(c.Settings.CapAdd)
	if !ok {
		return nnp, []string{"a planned capability is unknown"}
	}
	want["cap_bnd"] = mask
	if !strings.EqualFold(strings.TrimLeft(p.CapBnd, "0"), strings.TrimLeft(mask, "0")) {
		caps = append(caps, "another capability bounding set")
	}
	return nnp, caps
}

// checkCounters: the grader's counters were read before and after, and
// the requests sent without the key arrived and reached no handler.
func checkCounters(r *Report, e *expectation, plan *probePlan, ev gathered, probes []probe) {
	if !e.GraderRoutes || plan.scoped() {
		return
	}
	name := e.Server.Subject + ".grader_counters"
	read := map[string]counts{}
	var problems []string
	for _, pr := range probes {
		res, why := ev.result(pr)
		if why == "" && (res.Outcome != "reply" || res.Status != 200) {
			why = fmt.Sprintf("outcome %s, status %d %s", res.Outcome, res.Status, res.Error)
		}
		if why == "" {
			c, err := decodeCounts(res.Body)
			if err != nil {
				why = err.Error()
			} else {
				read[pr.phase] = c
			}
		}
		if why != "" {
			problems = append(problems, pr.phase+": "+why)
		}
	}
	r.Connectivity.add(name, map[string]bool{"before": read[PhaseBefore].Routes != nil, "after": read[PhaseAfter].Routes != nil}, map[string]bool{"before": true, "after": true},
		len(problems) == 0, strings.Join(problems, "; "))
	sent := map[string]int{}
	for _, pr := range plan.probes {
		if pr.route != "" && pr.route != graderCountersRoute {
			sent[pr.route]++
		}
	}
	before, after := read[PhaseBefore], read[PhaseAfter]
	observed := map[string]map[string]int64{}
	expected := map[string]map[string]int64{}
	ok := before.Routes != nil && after.Routes != nil
	for route, n := range sent {
		b, okB := before.Routes[route]
		a, okA := after.Routes[route]
		observed[route] = map[string]int64{"authorized_delta": a.Authorized - b.Authorized, "requests_delta": a.Requests - b.Requests}
		expected[route] = map[string]int64{"authorized_delta": 0, "requests_delta_at_least": int64(n)}
		if !okB || !okA || a.Authorized != b.Authorized || a.Requests-b.Requests < int64(n) {
			ok = false
		}
	}
	r.Connectivity.add(e.Server.Subject+".grader_side_effects", observed, expected, ok,
		"requests sent without the key reached a handler, did not all arrive, or the counters were not read")
}

// judgeMetadataRoutes judges each workspace's route to the metadata
// address, which no probe sends to: no route passes; a route passes only
// when it leaves as the route to the metadata stand-in does (the same
// source address) and that stand-in was shown unreachable from the same
// workspace, so its refusal speaks for the address. Anything else is no
// proof. The reference route is recorded beside it.
func judgeMetadataRoutes(routes []probe, ev gathered, refused map[string]bool, record func(probe, ProbeRecord, bool, string)) {
	refs := map[string]wire.Outcome{}
	for _, pr := range routes {
		if pr.want != wantRouteRef {
			continue
		}
		rec := ProbeRecord{ID: pr.req.ID, Check: pr.check, Target: pr.target, Want: "the reference route"}
		res, why := ev.result(pr)
		if why == "" {
			refs[pr.subject] = res
			rec.Outcome, rec.Error, rec.LatencyMS = strings.TrimSpace(res.Outcome+" "+res.Source), res.Error, res.LatencyMS
		}
		record(pr, rec, true, "") // evidence for the metadata route's verdict, not one of its own
	}
	for _, pr := range routes {
		if pr.want != wantMetadataRoute {
			continue
		}
		rec := ProbeRecord{ID: pr.req.ID, Check: pr.check, Target: pr.target, Want: wantText(pr)}
		res, why := ev.result(pr)
		if why != "" {
			record(pr, rec, false, why)
			continue
		}
		rec.Outcome, rec.Error, rec.LatencyMS = strings.TrimSpace(res.Outcome+" "+res.Source), res.Error, res.LatencyMS
		ref, hasRef := refs[pr.subject]
		switch {
		case res.Outcome == wire.OutcomeUnreachable:
			record(pr, rec, true, "")
		case res.Outcome != wire.OutcomeFound || res.Source == "":
			record(pr, rec, false, "no definite answer: "+strings.TrimSpace(res.Outcome+" "+res.Error))
		case !hasRef || ref.Outcome != wire.OutcomeFound:
			record(pr, rec, false, "a route from "+res.Source+", and no route to the stand-in to compare it with")
		case ref.Source != res.Source:
			record(pr, rec, false, fmt.Sprintf("a route from %s, another way than the stand-in's (from %s): not shown unreachable", res.Source, ref.Source))
		case !refused[pr.subject]:
			record(pr, rec, false, "a route from "+res.Source+", the way to a stand-in that was not shown unreachable")
		default:
			record(pr, rec, true, "")
		}
	}
}

func checkListeners(r *Report, obs Observation) {
	loopback := 0
	accepted := map[string]int{}
	for _, l := range obs.Listeners {
		if l.Kind == ListenerCanary {
			continue // reached or not, probe.network_canaries judges it
		}
		if l.Kind == ListenerLoopback {
			loopback++
		}
		accepted[l.Addr] = l.Accepted
	}
	ok := loopback > 0
	for _, n := range accepted {
		ok = ok && n == 0
	}
	reason := "a connection reached agentpen's own host listener during the probes"
	if loopback == 0 {
		reason = "agentpen opened no loopback listener on the host: the host's loopback was not probed"
	}
	r.Connectivity.add("connectivity.host_listener", accepted, "no connection accepted on any listener", ok, reason)
}

// gitSummary is a git probe's audits as a check observes them: each
// repository's path, base, what was checked and its leaks' names.
func gitSummary(audits []wire.GitAudit) []map[string]any {
	out := []map[string]any{}
	for _, a := range audits {
		m := map[string]any{"path": a.Path, "base": a.Base, "base_from": a.BaseFrom, "objects": a.Objects, "refs": a.Refs,
			"reflog_entries": a.ReflogEntries, "leak_count": a.LeakCount}
		if a.Error != "" {
			m["error"] = a.Error
		}
		var leaks []string
		for _, l := range a.Leaks {
			leaks = append(leaks, l.Kind+" "+l.Class+" "+l.Name)
		}
		if len(leaks) > 0 {
			m["leaks"] = leaks
		}
		out = append(out, m)
	}
	return out
}
