// Package docker is agentpen's driver (package adapter/driver) of one
// rootless Docker daemon, and the one place in agentpen that talks to
// Docker.
//
// It resolves and validates the daemon endpoint (ResolveHost: an explicit
// unix socket of a rootless daemon, never the rootful /var/run/docker.sock,
// never tcp or ssh, never a default taken from the environment), builds the
// Docker SDK client pinned to that endpoint with API-version negotiation
// (Connect), and refuses a daemon whose /info does not carry the
// name=rootless security option. The daemon identity it reads
// (campaign.Daemon) is what the attestation later proves against.
//
// It lays a campaign out (Layout) as the daemon's objects: an internal
// bridge network per agent where the topology asks for them, on /28
// subnets of SubnetPool that no network on the daemon uses (alloc.go),
// the grader's socket directory (topology none), the server, and each
// workspace as its run directory on the host (/run/workbench, bind-mounted:
// rundir.go) and its container (createopts.go: --init, a read-only root
// with sized tmpfs for /tmp, /var/tmp, /dev/shm and /run, no-new-privileges,
// every capability dropped but WorkspaceCaps, the workspace's own seccomp
// profile (seccomp.go), pids and memory limits requested, never the Docker
// socket or DOCKER_HOST). It creates, starts and awaits one object at a
// time (layout.go, ready.go), observes, looks up by name and removes one by
// exact id (resources.go), lists by label (list.go), runs commands by
// docker exec (exec.go), reaches a workspace's workbench through its unix
// socket, binds it to its task and reads its results file (workspace.go),
// and reads the daemon's own JSON for the attestation (evidence.go,
// observe.go), which package dockerjson decodes. Its errors carry the
// driver's kinds (errors.go). It never pulls an image (images.go resolves
// tags to the ids the plan then runs) and never removes by name or label.
//
// A run directory lives in the daemon user's runtime directory, which a
// container escape yields: every name below it is made, observed and
// removed relative to a descriptor of that directory, never following a
// link (internal/beneath).
//
// The SDK is used through dockerAPI, a small interface holding only the
// calls the driver makes; unit tests fake the daemon at the HTTP transport
// (internal/testkit/dockerfake) with the real SDK types, and integration
// tests run against the real rootless daemon that scripts/rootless-docker.sh
// starts. The engine's tests that need Docker live here, beside the
// conformance suite's (conformance_test.go).
package docker
