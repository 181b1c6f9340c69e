// Package adapter is the one place in agentpen that talks to Docker.
//
// It resolves and validates the daemon endpoint (ResolveHost: an explicit
// unix socket of a rootless daemon, never the rootful /var/run/docker.sock,
// never tcp or ssh, never a default taken from the environment), builds the
// Docker SDK client pinned to that endpoint with API-version negotiation
// (Connect), and refuses a daemon whose /info does not carry the
// name=rootless security option. The daemon identity it reads (Daemon) is
// what the attestation later proves against.
//
// # Campaigns
//
// NewPlan validates a launcher's CampaignSpec and computes every name,
// alias, label and environment variable before anything is created: one
// network per campaign (Internal unless egress is "nat"), a server
// container, and one workspace container per agent, named by an opaque
// agent id (OpaqueAgentID) so the task id never reaches anything the agent
// can see. Adapter.BringUp then, for each resource, appends an intent to the
// campaign's fsync'd Journal, creates it through the SDK, and journals the
// id the daemon returned; it starts the containers, creates workspaces
// concurrently (bounded by Parallelism) and waits for readiness: the
// server's health through docker exec (no port is published unless egress
// is "nat" and a loopback publish is asked for) and each workbench's
// /health on the unix socket in its /run/workbench directory. Any failure,
// including cancellation, removes what was created by exact id and says so
// in the journal. A crash leaves the journal naming everything that exists;
// TearDown (and later the cleanup report) removes by those ids only, never
// by a name pattern or a label filter.
//
// Workspace containers run with --init, a read-only root with sized tmpfs
// for /tmp, /var/tmp, /dev/shm and /run, no-new-privileges, every
// capability dropped but WorkspaceCaps, pids and memory limits requested
// (whether the daemon enforces them is Daemon's to say), and never the
// Docker socket or DOCKER_HOST. Decisions beyond DESIGN.md are in
// docs/decisions.md.
//
// The SDK is used through dockerAPI, a small interface holding only the
// calls the adapter makes; unit tests fake the daemon at the HTTP transport
// with the real SDK types, and integration tests run against the real
// rootless daemon that scripts/rootless-docker.sh starts. The adapter never
// pulls an image: every image it uses is built locally (make images), and
// BringUp refuses a campaign whose image is not on the daemon.
package adapter
