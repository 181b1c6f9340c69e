package attest

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentpen/agentpen/attest/evidence"
	"github.com/agentpen/agentpen/workbench/probe/wire"
)

// The checks' names for the evidence they judge (package
// attest/evidence: each driver decodes its runtime's answers into it).
type (
	container = evidence.Container
	info      = evidence.Daemon
	image     = evidence.Image
	mountInfo = evidence.Mount
	dnsConfig = evidence.DNS
)

// EpisodeIsolation is what an episode probe found in a workspace: the
// sandbox mode its workbench reports, the namespaces of the server and of
// code run as one of its episodes, that code's network interfaces, and
// its attempt at a vsock socket (the probe's wire.Isolation).
type EpisodeIsolation = wire.Isolation

func decodeProbeOutput(stdout string) (wire.BatchResult, error) {
	var out wire.BatchResult
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &out); err != nil {
		return wire.BatchResult{}, fmt.Errorf("probe output: %w", err)
	}
	return out, nil
}

// counts is the grader's GET /v1/counters reply.
type counts struct {
	Routes map[string]struct {
		Requests   int64 `json:"requests"`
		Authorized int64 `json:"authorized"`
	} `json:"routes"`
}

func decodeCounts(raw []byte) (counts, error) {
	var c counts
	if err := json.Unmarshal(raw, &c); err != nil {
		return counts{}, fmt.Errorf("grader counters: %w", err)
	}
	if c.Routes == nil {
		return counts{}, fmt.Errorf("grader counters: no routes")
	}
	return c, nil
}
