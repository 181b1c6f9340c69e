// Package adapter is the one place in agentpen that talks to Docker.
//
// It resolves and validates the daemon endpoint (ResolveHost: an explicit
// unix socket of a rootless daemon, never the rootful /var/run/docker.sock,
// never tcp or ssh, never a default taken from the environment), builds the
// Docker SDK client pinned to that endpoint with API-version negotiation
// (Connect), and refuses a daemon whose /info does not carry the
// name=rootless security option. The daemon identity it reads
// (campaign.Daemon) is what the attestation later proves against.
//
// It does not decide what a campaign is (package campaign plans it from the
// launcher's spec and folds its journal into a lifecycle, purely), whether
// a resource may be removed (package cleanup decides, purely), or where a
// campaign's files are (package store owns the state root, and every
// method here takes a store campaign); it does the Docker I/O those
// packages describe. Files are split by job: the client (adapter.go,
// docker.go, host.go), bring-up (bringup.go, alloc.go, progress.go) and its
// fail-closed policy (up.go), the Docker create settings (createopts.go),
// the workspaces' run directories (rundir.go), readiness (ready.go), exec
// (exec.go), observation (observe.go, list.go), attestation (attest.go),
// removal (cleanup.go, resolve.go, orphans.go) and rebuilding a campaign
// from its state directory (load.go).
//
// # Bring-up
//
// Adapter.BringUp takes a validated plan (campaign.Validate), then, for
// each resource, appends an intent (with a secret of that create, a label
// recorded nowhere else) to the campaign's fsync'd journal, creates it
// through the SDK, and journals the id the daemon returned. The agent
// networks come first; then the server and the workspaces are created and
// started concurrently (Parallelism at once, the server first), and each
// container's readiness is awaited from the moment it started: the
// server's through docker exec of its ready command (no port is published
// unless egress is "nat" and a loopback publish is asked for) and each
// workbench's /health on the unix socket in its /run/workbench directory. Any failure, including cancellation,
// removes what was created by exact id and says so in the journal. A
// create that failed is never adopted when the daemon said the name was
// taken (a conflict: a twin campaign's resource carries the same labels);
// after any other failure the name is looked up and adopted only when its
// labels, the create's secret among them, prove it is this create's.
// Adapter.Up is the policy agentpen up and the launcher share: bring up,
// attest, and remove a campaign that does not attest.
//
// # Removal
//
// Cleanup (and the rollback) removes, by the ids the journal recorded and
// never by a name pattern or a label filter, in three steps per resource:
// observe (inspect by id, or stat a run directory), decide
// (cleanup.Decide: remove, already gone, not ours, or refuse, with a
// reason) and act (remove by id). What is not ours or cannot be decided is
// left alone and named in the error.
//
// Workspace containers run with --init, a read-only root with sized tmpfs
// for /tmp, /var/tmp, /dev/shm and /run, no-new-privileges, every
// capability dropped but WorkspaceCaps, pids and memory limits requested
// (whether the daemon enforces them is campaign.Daemon's to say), and
// never the Docker socket or DOCKER_HOST. Decisions beyond docs/design.md
// are in docs/decisions.md.
//
// The SDK is used through dockerAPI, a small interface holding only the
// calls the adapter makes; unit tests fake the daemon at the HTTP transport
// (internal/testkit/dockerfake) with the real SDK types, and integration
// tests run against the real rootless daemon that
// scripts/rootless-docker.sh starts. The adapter never pulls an image:
// every image it uses is built locally (make images), and BringUp refuses a
// campaign whose image is not on the daemon.
package adapter
