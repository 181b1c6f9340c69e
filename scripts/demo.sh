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
# Needs DOCKER_HOST (scripts/rootless-docker.sh), the images (make images) and bin/ (make
# build). AGENTPEN_API_KEY is generated for the run unless set. Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

prog=demo
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
need_docker_host
export AGENTPEN_API_KEY=${AGENTPEN_API_KEY:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}
AGENTPEN_SERVE_TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
export AGENTPEN_SERVE_TOKEN
state=$(mktemp -d /tmp/agentpen-demo.XXXXXX)
campaign="demo-$(date +%s)"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
api="http://127.0.0.1:$port"
img=$(docker image inspect --format '{{.Id}}' agentpen/workbench:dev)

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
trap stop EXIT
for _ in $(seq 100); do
	if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/healthz", timeout=1)' "$api" 2>/dev/null; then
		break
	fi
	kill -0 "$serve_pid" 2>/dev/null || die "agentpen serve exited: $(tail -5 "$state/serve.log")"
	sleep 0.1
done

status=0
python3 testdata/clients/launcher_demo.py --api "$api" --image "$img" --oracles testdata/oracles \
	--campaign "$campaign" software/median@7=code sql/top_customer@3=text security/leaked_secrets@1=set \
	>"$state/result.txt" || status=1
stop
trap - EXIT
cat "$state/result.txt"
echo "service log:        $state/serve.log"
exit $status
