#!/usr/bin/env bash
# serve.sh: run `agentpen serve` in the foreground on 127.0.0.1:8700 (make serve), for a
# launcher on this machine. The bearer token is read from AGENTPEN_SERVE_TOKEN when it is set;
# otherwise one is generated into <state root>/api/token (mode 0600) and passed with
# --token-file, and only the file's path is printed. AGENTPEN_API_KEY (the campaigns' grader
# key) is generated for the service's lifetime unless set. Extra arguments go to agentpen
# serve (e.g. --listen unix:///run/agentpen.sock). Stop it with Ctrl-C: campaigns stay up.
#
# Needs DOCKER_HOST (scripts/rootless-docker.sh), the images (make images) and bin/ (make build).
set -euo pipefail
cd "$(dirname "$0")/.."

prog=serve
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
need_docker_host
export AGENTPEN_API_KEY=${AGENTPEN_API_KEY:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}
state=${AGENTPEN_STATE_ROOT:-${XDG_STATE_HOME:-$HOME/.local/state}/agentpen}
args=(--state-root "$state")
if [ -z "${AGENTPEN_SERVE_TOKEN:-}" ]; then
	token="$state/api/token"
	if [ ! -s "$token" ]; then
		(umask 077 && mkdir -p "$state/api")
		(umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$token")
	fi
	args+=(--token-file "$token")
	log "bearer token: in $token (curl -H \"Authorization: Bearer \$(cat $token)\" ...)"
fi
exec bin/agentpen serve "${args[@]}" "$@"
