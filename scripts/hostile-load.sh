#!/usr/bin/env bash
# hostile-load.sh: the hostile corpus under load, a CI step of its own (make hostile). While
# LOOPS_PER_CORE busy loops per core (default 4) hold every core, it runs, each once:
#   - on this host: the sandbox's tests and the hostile agents (workbench/sandbox,
#     TestHostileAgents in workbench/episode), kill_under_load.py RUNS times (default 200);
#   - in a workspace container (TestSandboxInWorkspaceContainer in adapter/docker: the same test
#     binaries under a campaign workspace's hardening), kill_under_load.py RUNS times;
#   - the served hostile agents against a live workbench serve (cmd/workbench).
# Every run must leave no process of the episode's uid, and every step must run a test: a
# pattern that matches none (a test moved) fails the step rather than pass it empty. The busy loops are this script's own
# children, stopped when it exits however it exits. Needs root, the rootless daemon and the
# images (make hostile sees to both). On this shared 2-core machine (load average 35 to 80 from
# other work besides the busy loops) the steps took 9 s, 21 min, 1.5 min and 41 min: 64 minutes;
# each package is bounded by TIMEOUT.
#
#   scripts/hostile-load.sh            RUNS=200 LOOPS_PER_CORE=4 TIMEOUT=75m by default;
#                                      STEPS="sandbox episode served container" selects steps
set -euo pipefail
cd "$(dirname "$0")/.."

prog=hostile-load
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
case "${1:-}" in -h | --help) usage; exit 0 ;; "") ;; *) usage; exit 2 ;; esac
[ "$(id -u)" = 0 ] || die "run as root: the sandbox needs it"
need_docker_host
RUNS=${RUNS:-200}
LOOPS_PER_CORE=${LOOPS_PER_CORE:-4}
TIMEOUT=${TIMEOUT:-75m}
STEPS=${STEPS:-sandbox episode served container}
GO=${GO:-go}

loops=()
stop_loops() {
	[ ${#loops[@]} -eq 0 ] || kill "${loops[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
	[ -z "${out:-}" ] || rm -f "$out"
}
trap stop_loops EXIT
n=$((LOOPS_PER_CORE * $(nproc)))
for _ in $(seq "$n"); do
	(while :; do :; done) &
	loops+=($!)
done
log "$n busy loops on $(nproc) cores; kill_under_load.py runs $RUNS times per episode test"

out=$(mktemp)
export WORKBENCH_KILL_UNDER_LOAD_RUNS=$RUNS AGENTPEN_REQUIRE_DOCKER=1
start=$(date +%s)
step() {
	local name=$1 t0
	shift
	case " $STEPS " in *" $name "*) ;; *) return 0 ;; esac
	t0=$(date +%s)
	log "$*"
	"$GO" test -count=1 -timeout "$TIMEOUT" "$@" 2>&1 | tee "$out"
	! grep -q 'no tests to run' "$out" || die "$*: no test ran (has the test moved?)"
	log "done in $(($(date +%s) - t0)) s: $*"
}
step sandbox ./workbench/sandbox/
step episode -run '^TestHostileAgents$' ./workbench/episode/
step served -run '^TestServedHostileAgents$' ./cmd/workbench/
step container -run '^TestSandboxInWorkspaceContainer$' ./adapter/docker/
log "all green in $(($(date +%s) - start)) s under $n busy loops"
