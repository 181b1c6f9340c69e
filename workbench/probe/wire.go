package probe

import "github.com/agentpen/agentpen/workbench/probe/wire"

// The batch's JSON is package wire's (shared with the attestation); these
// names keep this package's code and callers short.
type (
	Batch       = wire.Batch
	Request     = wire.Request
	BatchResult = wire.BatchResult
	Outcome     = wire.Outcome
	Socket      = wire.Socket
	Process     = wire.Process
	File        = wire.File
	Isolation   = wire.Isolation
	GitAudit    = wire.GitAudit
	GitLeak     = wire.GitLeak
	Binary      = wire.Binary
)

// Probe kinds, outcomes and limits (package wire's).
const (
	KindHTTP       = wire.KindHTTP
	KindTCP        = wire.KindTCP
	KindSocket     = wire.KindSocket
	KindProcess    = wire.KindProcess
	KindUnix       = wire.KindUnix
	KindInterfaces = wire.KindInterfaces
	KindUIDBlock   = wire.KindUIDBlock
	KindFile       = wire.KindFile
	KindEpisode    = wire.KindEpisode
	KindGit        = wire.KindGit
	KindRoute      = wire.KindRoute

	OutcomeConnected   = wire.OutcomeConnected
	OutcomeReply       = wire.OutcomeReply
	OutcomeRefused     = wire.OutcomeRefused
	OutcomeTimeout     = wire.OutcomeTimeout
	OutcomeUnreachable = wire.OutcomeUnreachable
	OutcomeDNS         = wire.OutcomeDNS
	OutcomeDenied      = wire.OutcomeDenied
	OutcomeError       = wire.OutcomeError
	OutcomeVisible     = wire.OutcomeVisible
	OutcomeNone        = wire.OutcomeNone
	OutcomeFound       = wire.OutcomeFound
	OutcomeNotFound    = wire.OutcomeNotFound
	OutcomeReadable    = wire.OutcomeReadable
	OutcomeClean       = wire.OutcomeClean
	OutcomeLeak        = wire.OutcomeLeak

	MaxBatch   = wire.MaxBatch
	MaxTimeout = wire.MaxTimeout
	// maxBody is the most of a reply body a probe with Body returns.
	maxBody = 64 << 10
)
