# shellcheck shell=bash
# lib.sh: what agentpen's scripts share. Source it after naming the script:
#
#   prog=python-base
#   . "$(dirname "$0")/lib.sh"
#
# log and die write "<prog>: ..." to standard error (standard output stays for what a script
# prints for machines, such as rootless-docker.sh's export line); usage prints the script's header
# comment (from line 2 up to the `set -euo pipefail` line); need_docker_host stops with the fix
# when DOCKER_HOST is unset.

log() { printf '%s: %s\n' "${prog:-${0##*/}}" "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; }
need_docker_host() {
	[ -n "${DOCKER_HOST:-}" ] || die "DOCKER_HOST is not set; run: eval \"\$(scripts/rootless-docker.sh)\""
}
