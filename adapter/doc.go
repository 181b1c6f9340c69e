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
// The SDK is used through dockerAPI, a small interface holding only the
// calls the adapter makes; unit tests fake the daemon at the HTTP transport
// with the real SDK types, and integration tests run against the real
// rootless daemon that scripts/rootless-docker.sh starts. The adapter never
// pulls an image: every image it uses is built locally (make images).
package adapter
