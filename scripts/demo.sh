#!/usr/bin/env bash
# demo.sh: the main job as a benchmark launcher sees it, end to end on the rootless daemon (make run).
#
#   scripts/demo.sh [--json] [--campaign ID] [--oracles DIR]
#
# Starts `agentpen serve --cleanup-on-exit` (loopback, a generated bearer token passed in its
# environment), then testdata/clients/launcher_demo.py, speaking only HTTP and WebSocket: it
# creates a campaign of a grader and three workspaces (POST /v1/campaigns), plays one oracle
# episode in each through the base_url the API returned, fetches the attestation (ok) and
# deletes the campaign (cleanup verified). Then the service is stopped (SIGTERM, by its pid),
# the state root is checked for anything left (agentpen ls; agentpen down for what is), and a
# table (workspace, task, reward, steps), the paths of the JSON reports and the cleanup's
# status are printed. The state directory, with the reports, the service's log and
# result.json (the same results for machines, schema agentpen.demo.v1: see
# testdata/clients/launcher_demo.py), is kept under ${TMPDIR:-/tmp}/agentpen-demo.*.
#
#   --json          print result.json on stdout instead of the table (make run DEMO_FLAGS=--json)
#   --campaign ID   the campaign id (default demo-<time>-<random>)
#   --oracles DIR   the oracle answers to play (default testdata/oracles)
#
# Whatever happens (a failure, SIGINT, SIGTERM at any moment), the service and the launcher are
# stopped and the campaign removed before the script exits; a signal that comes once that cleanup
# has begun is noted and cuts nothing short (nor changes the exit status).
# Exit status: 0 every episode earned 1.0, the attestation was ok and the cleanup verified,
# nothing left; 1 any of these not so, or a step failed (a cleanup not verified is 1 even when
# interrupted); 2 bad arguments; 130/143 interrupted by SIGINT/SIGTERM (cleanup verified).
#
# Needs DOCKER_HOST (scripts/rootless-docker.sh), the images (make images) and bin/ (make build).
# With AGENTPEN_KUBECONFIG set (and AGENTPEN_KUBE_NODE, AGENTPEN_KUBE_SECCOMP: eval "$(scripts/
# kube-node.sh env)", as make run KUBE=1 does), every agentpen command of the demo acts on that
# Kubernetes cluster instead, and the images are named by tag.
# AGENTPEN_API_KEY is generated for the run unless set (openssl rand -hex 32). Progress goes to
# stderr. docs/newcomer.md walks through a campaign with agentpen up and workbench client, by hand.
set -euo pipefail
cd "$(dirname "$0")/.."

prog=demo
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

json=false
campaign=
oracles=testdata/oracles
while [ $# -gt 0 ]; do
	case $1 in
	--json) json=true ;;
	--campaign | --oracles)
		[ $# -ge 2 ] || {
			log "error: $1 needs a value (scripts/demo.sh --help)"
			exit 2
		}
		if [ "$1" = --campaign ]; then campaign=$2; else oracles=$2; fi
		shift
		;;
	-h | --help)
		usage 2>&1
		exit 0
		;;
	*)
		log "error: unknown argument $1 (scripts/demo.sh --help)"
		exit 2
		;;
	esac
	shift
done
need_docker_host

# What the cleanup stops and checks; set as each exists.
state='' serve_pid='' launcher_pid='' signal='' status=0

# reap PID: wait until PID has exited (a trapped signal interrupts wait, the child may still
# run) and return its exit status.
reap() {
	local st
	while :; do
		st=0
		wait "$1" || st=$?
		if [ "$st" -gt 128 ] && kill -0 "$1" 2>/dev/null; then
			continue
		fi
		return "$st"
	done
}

# shellcheck disable=SC2317 # called from finish, which only the EXIT trap runs
# shielded CMD...: run CMD in a session of its own, out of the script's process group: a
# terminal's ^C, which keeps coming to the group while the cleanup runs, cannot cut it short.
shielded() {
	setsid -w "$@"
}

# shellcheck disable=SC2317 # called from finish, which only the EXIT trap runs
# leftovers [all]: remove, by agentpen down, every campaign of the state root that is not gone
# (agentpen ls: a journalled live resource, a live container or network carrying its label, or
# a state it cannot read); with all, every campaign, so that down verifies each again. Fails
# unless each down verified.
leftovers() {
	local rc=0 id
	# No command substitution: its subshell would die of the ^C the script itself notes.
	if ! shielded bin/agentpen ls --state-root "$state" --json >"$state/leftovers.json" ||
		! shielded python3 -c '
import json, sys
for c in json.load(open(sys.argv[1])):
    if sys.argv[2] or c.get("error") or c["journalled_live"] or c["live_containers"] or c["live_networks"]:
        print(c["campaign_id"])
' "$state/leftovers.json" "${1:-}" >"$state/leftovers.ids"; then
		log "agentpen ls --state-root $state failed: what is left is unknown"
		return 1
	fi
	while read -r id; do
		log "campaign $id: agentpen down $id"
		shielded bin/agentpen down --state-root "$state" "$id" >&2 </dev/null || rc=1
	done <"$state/leftovers.ids"
	return "$rc"
}

# shellcheck disable=SC2317 # run by the EXIT trap
# finish runs on every exit: stop what runs, remove what is left, say how it ended.
finish() {
	local rc=$? pid serve_rc=0
	set +e
	# A second signal must not cut the cleanup short: a ^C is ignored, by the commands the
	# cleanup starts too (they inherit it until shielded puts them out of the terminal's reach);
	# a SIGTERM is noted.
	trap '' INT
	local noted=''
	trap '[ -n "$noted" ] || log "cleanup in progress; it ends by itself"; noted=1' TERM
	trap - EXIT
	[ -n "$signal" ] && rc=$((128 + $(kill -l "$signal")))
	# Every background child: a pid started just before the signal came may not be in
	# serve_pid or launcher_pid yet, but bash lists it.
	for pid in $(jobs -p); do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in $(jobs -p); do
		if [ "$pid" = "$serve_pid" ]; then
			reap "$pid" || serve_rc=$?
		else
			reap "$pid" || true
		fi
	done
	[ -n "$serve_pid" ] && log "agentpen serve stopped (exit $serve_rc)"
	# Exit 1 from the service: its cleanup on exit was not verified; every campaign is then
	# taken down again, and that down's verdict is the cleanup's.
	local cleanup=verified all=''
	[ "$serve_rc" -eq 1 ] && all=all
	if [ -n "$state" ] && ! leftovers "$all"; then
		cleanup="NOT verified"
		rc=1
		[ -f "$state/result.json" ] && shielded python3 - "$state/result.json" <<'PY'
import json, os, sys
p = sys.argv[1]
r = json.load(open(p))
r["ok"] = False
r["cleanup"]["status"] = "failed"
r["cleanup"]["error"] = (r["cleanup"].get("error") or "") + " (after the run, agentpen down did not verify the removal of what was left: see the demo's stderr)"
json.dump(r, open(p + ".tmp", "w"), indent=2)
os.replace(p + ".tmp", p)
PY
	fi
	if [ -n "$signal" ]; then
		log "interrupted by SIG$signal; cleanup: $cleanup (exit $rc)"
	elif [ -f "$state/result.json" ]; then
		if $json; then
			cat "$state/result.json"
		else
			cat "$state/result.txt"
			echo "service log:        $state/serve.log"
			echo "result (JSON):      $state/result.json"
		fi
	elif [ -n "$state" ]; then
		log "failed (exit $rc); cleanup: $cleanup; the service's log: $state/serve.log"
	fi
	exit "$rc"
}
trap finish EXIT
# INT and TERM end the script through finish, with 130 or 143.
trap 'signal=INT; exit 130' INT
trap 'signal=TERM; exit 143' TERM

export AGENTPEN_API_KEY=${AGENTPEN_API_KEY:-$(openssl rand -hex 32)}
AGENTPEN_SERVE_TOKEN=$(openssl rand -hex 32)
export AGENTPEN_SERVE_TOKEN
[ -n "$campaign" ] || campaign="demo-$(date +%s)-$(openssl rand -hex 3)"
img=${AGENTPEN_TEST_WORKBENCH_IMAGE:-agentpen/workbench:dev}
if [ -n "${AGENTPEN_KUBECONFIG:-}" ]; then
	# A cluster's nodes hold the image under its tag (serve resolves it among their images).
	log "on the cluster of $AGENTPEN_KUBECONFIG (node ${AGENTPEN_KUBE_NODE:-any})"
else
	img=$(docker image inspect --format '{{.Id}}' "$img")
fi
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
api="http://127.0.0.1:$port"
state=$(mktemp -d "${TMPDIR:-/tmp}/agentpen-demo.XXXXXX")

log "agentpen serve on $api (log: $state/serve.log)"
bin/agentpen serve --cleanup-on-exit --state-root "$state" --listen "127.0.0.1:$port" 2>"$state/serve.log" &
serve_pid=$!
# Ready when /healthz answers; a service that exits first fails the demo with its log. In the
# background, as every long step, so that a signal is acted on at once.
python3 - "$api" "$serve_pid" <<'PY' &
import sys, time, urllib.request
api, pid = sys.argv[1], sys.argv[2]
while True:
    try:
        urllib.request.urlopen(api + "/healthz", timeout=5).close()
        break
    except OSError:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rpartition(")")[2].split()[0] == "Z":
                    sys.exit(1)
        except FileNotFoundError:
            sys.exit(1)
        time.sleep(0.05)
PY
reap $! || die "agentpen serve did not start: $(tail -5 "$state/serve.log")"

log "campaign $campaign: a grader and three workspaces, one oracle episode each"
AGENTPEN_TOKEN=$AGENTPEN_SERVE_TOKEN python3 testdata/clients/launcher_demo.py --api "$api" --image "$img" --oracles "$oracles" \
	--campaign "$campaign" --result "$state/result.json" \
	software/median@7=code sql/top_customer@3=text security/leaked_secrets@1=set \
	>"$state/result.txt" &
launcher_pid=$!
reap "$launcher_pid" || status=1
exit $status
