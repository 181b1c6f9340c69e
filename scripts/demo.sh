#!/usr/bin/env bash
# demo.sh: the main job end to end on the rootless daemon. Brings a campaign up (a grader and
# three workspaces, internal network) with `agentpen up`, plays one oracle episode in each
# workspace through its unix socket with the standard-library OpenEnv client, prints the
# rewards, and removes the campaign with `agentpen down` (also when something fails).
#
# Needs DOCKER_HOST (scripts/rootless-docker.sh), the images (make images) and bin/ (make build).
# AGENTPEN_API_KEY is generated for the run unless set (openssl rand -hex 32). Progress goes to
# stderr. docs/newcomer.md walks through the same with workbench client, by hand.
set -euo pipefail
cd "$(dirname "$0")/.."

prog=demo
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
need_docker_host
export AGENTPEN_API_KEY=${AGENTPEN_API_KEY:-$(openssl rand -hex 32)}
state=$(mktemp -d /tmp/agentpen-demo.XXXXXX)
campaign="demo-$(date +%s)"
tasks=(software/median@7 sql/top_customer@3 security/leaked_secrets@1)
kinds=(code text set)

img=$(docker image inspect --format '{{.Id}}' agentpen/workbench:dev)
{
	printf '{"campaign_id": "%s", "server": {"image": "%s"}, "workspaces": [' "$campaign" "$img"
	for i in "${!tasks[@]}"; do
		[ "$i" -gt 0 ] && printf ','
		printf '{"task_id": "%s", "image": "%s"}' "${tasks[$i]}" "$img"
	done
	printf ']}\n'
} >"$state/spec.json"

cleanup() {
	log "agentpen down $campaign"
	bin/agentpen down --state-root "$state" "$campaign" >/dev/null || true
	rm -rf "$state"
}
trap cleanup EXIT

log "agentpen up (${#tasks[@]} workspaces)"
# Progress and a summary (every workspace's socket) go to stderr; the ids, as JSON, to up.json.
bin/agentpen up --state-root "$state" "$state/spec.json" >"$state/up.json"

status=0
for i in "${!tasks[@]}"; do
	sock=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["workspaces"][int(sys.argv[2])]["socket"])' "$state/up.json" "$i")
	out=$(python3 testdata/clients/workbench_client.py --unix "$sock" --oracles testdata/oracles \
		"${tasks[$i]}=${kinds[$i]}") || status=1
	echo "${out%%$'\n'*}" # "<task> reward=<r> steps=<n>"; the JSON summary line is dropped
done
exit $status
