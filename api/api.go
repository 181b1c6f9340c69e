// Package api holds the types of agentpen's launcher API as they cross the
// wire: what agentpen serve answers, what launcher/client decodes, and
// what the engine (package adapter) describes a campaign's workspaces
// with. It is types only, with the JSON names and the documentation the
// OpenAPI document carries: no behaviour, no runtime, no HTTP stack
// (a test in the repository root keeps it to the standard library).
//
// The reports a route returns (attest.Report, cleanup.Report) and the
// episode results (store.Result) are their own packages' types: they are
// files agentpen signs before any route serves them.
package api

import "time"

// Workspace is one workspace of a campaign: the one object agentpen up's
// JSON, agentpen ls --json and the launcher API describe a workspace with.
// What only one runtime has (the Docker workspace's socket on the
// service's host) is optional: a runtime without it leaves it empty.
type Workspace struct {
	Index   int    `json:"index" doc:"Position in the spec's workspaces"`
	AgentID string `json:"agent_id" doc:"Opaque agent id: the only name the workspace has on the daemon"`
	TaskID  string `json:"task_id" doc:"The task the workspace is bound to (every reset serves it). For the trainer, not the agent"`
	// ContainerID is the runtime's id of its container (a Docker
	// container id; a pod's UID on a cluster).
	ContainerID string `json:"container_id" doc:"Its container's id on the daemon"`
	// Socket is the workbench's unix socket on the host (the CLI's way
	// in), where the runtime has one; BaseURL the launcher API's (set by
	// the service).
	Socket  string `json:"socket,omitempty" doc:"The workbench's unix socket on the service's host"`
	BaseURL string `json:"base_url,omitempty" doc:"OpenEnv base_url: GenericEnvClient(base_url=...) appends /ws. Its last segment is the workspace's capability: keep it secret"`
	// Pooled is true for a workspace taken from the campaign's pool,
	// bound to TaskID when it was claimed.
	Pooled bool `json:"pooled,omitempty" doc:"Taken from the campaign's pool and bound to its task when it was claimed"`
}

// CampaignView is a campaign as the API shows it: ids, state, its
// workspaces and where its reports are. It deliberately leaves out the
// runtime's topology (networks, container ids): launchers reach
// workspaces through base_url only.
type CampaignView struct {
	CampaignID string `json:"campaign_id" doc:"The campaign's id, as in the spec"`
	Owner      string `json:"owner,omitempty" doc:"The name of the token that created its latest generation (absent: agentpen up made it, and only the operator's token sees it)"`
	Generation int    `json:"generation" doc:"Which bring-up of this campaign id this is (1 for the first)"`
	State      string `json:"state" enum:"creating,ready,attestation_failed,starting_or_failed,deleting,cleanup_failed,removed,unusable" doc:"Read from the campaign's journal on every request. creating and deleting: this service's operation in progress; ready: up and attested, workspaces served; attestation_failed: its latest attestation failed, workspaces not served (attest again, or DELETE); starting_or_failed: resources live but its bring-up never finished (killed, or running in another process): DELETE; cleanup_failed: a removal not verified or interrupted: DELETE again; removed: nothing of it is live; unusable: its journal is corrupt, or its state directory or journal is owned or writable by another user: nothing is done with it (error says why; agentpen ls and docs/troubleshooting.md)"`
	StateDir   string `json:"state_dir" doc:"The campaign's state directory on the service's host (journal, spec, reports)"`
	// Workspaces are in the spec's order; empty unless the state is
	// ready.
	Workspaces    []Workspace   `json:"workspaces"`
	Lifetime      *LifetimeView `json:"lifetime,omitempty" doc:"Its lifetime (absent: none); PATCH changes it"`
	RemovalReason string        `json:"removal_reason,omitempty" doc:"Why its latest removal began: delete, down, ttl, idle, launcher_gone, rollback, not_attested, reconcile, ... (absent: none)"`
	Pool          *PoolView     `json:"pool,omitempty" doc:"Its latest generation's pool of workspaces (absent: none)"`
	Attestation   *ReportRef    `json:"attestation,omitempty" doc:"The latest attestation of this generation (GET .../attestation for the report)"`
	Cleanup       *ReportRef    `json:"cleanup,omitempty" doc:"The last cleanup of this generation, when there is one (GET .../cleanup for the report)"`
	Error         string        `json:"error,omitempty" doc:"Why the state is unusable"`
}

// PoolView counts the pool slots of a campaign's latest generation by
// where each is.
type PoolView struct {
	Warm      int `json:"warm" doc:"Made, attested, never claimed: a claim takes one at once"`
	Claimed   int `json:"claimed" doc:"Bound to a task by a claim (live or since removed)"`
	Refilling int `json:"refilling" doc:"Being made or attested: warm once attested"`
}

// ReportRef says where a report is and what it concluded.
type ReportRef struct {
	OK     bool   `json:"ok"`
	Status string `json:"status,omitempty" doc:"The cleanup's status (verified or failed)"`
	Path   string `json:"path" doc:"The report's file on the service's host"`
}

// LifetimeView is a campaign's lifetime as the API shows it.
type LifetimeView struct {
	AcceptedAt         time.Time  `json:"accepted_at" doc:"When its create was accepted: ttl_seconds counts from it"`
	TTLSeconds         int        `json:"ttl_seconds,omitempty" doc:"Its time to live (absent: none)"`
	ExpiresAt          *time.Time `json:"expires_at,omitempty" doc:"When it is removed (reason ttl)"`
	IdleTimeoutSeconds int        `json:"idle_timeout_seconds,omitempty" doc:"How long without a reset or a step (through the proxy or a workspace's socket) before it is removed (reason idle); absent: none"`
	// LauncherTimeoutSeconds ties the campaign to the launcher that
	// created it.
	LauncherTimeoutSeconds int `json:"launcher_timeout_seconds,omitempty" doc:"How long the launcher that created it may be gone (no event stream of it open, no keepalive) before it is removed (reason launcher_gone); absent: not tied"`
}

// KeepaliveView is the answer of a keepalive.
type KeepaliveView struct {
	CampaignID             string     `json:"campaign_id"`
	LauncherTimeoutSeconds int        `json:"launcher_timeout_seconds,omitempty" doc:"Its launcher timeout (absent: not tied to its launcher)"`
	GoneAt                 *time.Time `json:"gone_at,omitempty" doc:"When it is removed (reason launcher_gone) unless another keepalive comes or an event stream of it is opened; absent while one is open, or when not tied"`
}

// ClaimView is the answer of a claim: the workspace bound to the task.
type ClaimView struct {
	CampaignID string    `json:"campaign_id"`
	Workspace  Workspace `json:"workspace" doc:"The workspace bound to the task, with its base_url"`
	Pool       string    `json:"pool" enum:"warm,cold" doc:"warm: taken from the pool; cold: the pool was drained and the workspace was made, awaited and attested for this claim"`
	Slot       int       `json:"slot" doc:"Its pool slot (the journal's claim record names it)"`
	ClaimedAt  time.Time `json:"claimed_at" doc:"When the claim was journalled"`
}

// Image is one of the runtime's local images, as GET /v1/images and
// agentpen images describe it.
type Image struct {
	ID      string    `json:"id" doc:"The image id (sha256:...): what a spec pins"`
	Tags    []string  `json:"tags" doc:"Its local tags (repo:tag), sorted; a spec may name one, which is resolved to the id at create time"`
	Created time.Time `json:"created" doc:"When it was built"`
	// Workbench is its workbench version (WorkbenchLabel), "" for none.
	Workbench string `json:"workbench,omitempty" doc:"The workbench version the image carries (its io.agentpen.workbench label); absent for an image without the workbench, which cannot run the default grader or episode server"`
}

// WorkbenchLabel is the label the workbench image carries (the
// Dockerfile sets it), whose value is the workbench's version.
const WorkbenchLabel = "io.agentpen.workbench"

// MaxEpisodesPage is the most results one page of the episodes route
// holds.
const MaxEpisodesPage = 1000
