#!/usr/bin/env bash
# demo.sh: the main job as a benchmark launcher sees it, end to end on the rootless daemon.
# Starts `agentpen serve` (loopback, a generated bearer token passed in its environment),
# then testdata/clients/launcher_demo.py, speaking only HTTP and WebSocket: it creates a
# campaign of a grader and three workspaces (POST /v1/campaigns), plays one oracle episode in
# each through the base_url the API returned, fetches the attestation (ok) and deletes the
# campaign (cleanup verified); then the service is stopped (SIGTERM, by its pid) and a table
# (workspace, task, reward, steps) and the paths of the JSON reports are printed. The state
# directory, with the reports and the service's log, is kept under /tmp/agentpen-demo.*.
#
# Needs DOCKER_HOST (scripts/rootless-docker.sh), the images (make images) and bin/ (make build).
# AGENTPEN_API_KEY is generated for the run unless set (openssl rand -hex 32). Progress goes to
# stderr. docs/newcomer.md walks through a campaign with agentpen up and workbench client, by hand.
set -euo pipefail
cd "$(dirname "$0")/.."

prog=demo
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
need_docker_host
export AGENTPEN_API_KEY=${AGENTPEN_API_KEY:-$(openssl rand -hex 32)}
AGENTPEN_SERVE_TOKEN=$(openssl rand -hex 32)
export AGENTPEN_SERVE_TOKEN
state=$(mktemp -d /tmp/agentpen-demo.XXXXXX)
campaign="demo-$(date +%s)"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
api="http://127.0.0.1:$port"
img=$(docker image inspect --format '{{.Id}}' "${AGENTPEN_TEST_WORKBENCH_IMAGE:-agentpen/workbench:dev}")

log "agentpen serve on $api (log: $state/serve.log)"
bin/agentpen serve --state-root "$state" --listen "127.0.0.1:$port" 2>"$state/serve.log" &
serve_pid=$!
stop() {
	if kill -0 "$serve_pid" 2>/dev/null; then
		log "stopping agentpen serve (pid $serve_pid)"
		kill -TERM "$serve_pid"
		wait "$serve_pid" || true
	fi
}
trap cleanup EXIT

log "agentpen up (${#tasks[@]} workspaces)"
# Progress and a summary (every workspace's socket) go to stderr; the ids, as JSON, to up.json.
bin/agentpen up --state-root "$state" "$state/spec.json" >"$state/up.json"

status=0
python3 testdata/clients/launcher_demo.py --api "$api" --image "$img" --oracles testdata/oracles \
	--campaign "$campaign" software/median@7=code sql/top_customer@3=text security/leaked_secrets@1=set \
	>"$state/result.txt" || status=1
stop
trap - EXIT
cat "$state/result.txt"
echo "service log:        $state/serve.log"
exit $status
