#!/usr/bin/env bash
# commit-check.sh: check the form of commit messages (make lint runs it; CI through make test).
#
#   scripts/commit-check.sh [--base REV] [REV]
#
# Checks BASE (default d9d57a6, the first commit written in this form) and every commit after it
# that REV (default HEAD) reaches, merges included, and names each message that breaks a rule:
#
#   1. the subject (first line) is not empty and at most 72 characters;
#   2. when there is a body, the second line is blank;
#   3. body lines are at most 72 characters, except a line that cannot be wrapped: one that
#      starts with a space or a tab (a quoted command, code or output, which git log shows as
#      written) and one that is a single word (a URL or a path).
#
# Characters are counted, not bytes. Exits 0 when every message keeps the rules, 1 when one does
# not (or when the history is missing in CI), 2 on a bad command line. In a clone without the
# history (a shallow clone, or no git repository) it says so and exits 0, or 1 when CI=true.
set -euo pipefail

prog=commit-check
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
export LC_ALL=C.UTF-8

base=d9d57a6
rev=HEAD
while [ $# -gt 0 ]; do
	case $1 in
	-h | --help)
		usage
		exit 0
		;;
	--base)
		[ $# -ge 2 ] || {
			log "--base needs a revision"
			exit 2
		}
		base=$2
		shift 2
		;;
	-*)
		log "unknown flag $1 (see --help)"
		exit 2
		;;
	*)
		rev=$1
		shift
		;;
	esac
done

no_history() {
	if [ "${CI:-}" = true ]; then
		die "$1: the commit messages cannot be checked (CI needs a full clone: git fetch --unshallow)"
	fi
	log "skipped: $1 (fetch the full history to check the commit messages)"
	exit 0
}

git rev-parse --git-dir >/dev/null 2>&1 || no_history "not in a git repository"
git cat-file -e "$base^{commit}" 2>/dev/null || no_history "commit $base is not in this clone"
if [ "$(git rev-parse --is-shallow-repository)" = true ] && ! git merge-base --is-ancestor "$base" "$rev" 2>/dev/null; then
	no_history "this clone is shallow"
fi
git merge-base --is-ancestor "$base" "$rev" || die "$base is not an ancestor of $rev"

checked=0
bad=0
# The parents of base end the range, so base itself is checked; a root base checks everything.
mapfile -t parents < <(git rev-parse "$base^@")
for c in $(git rev-list "$rev" --not "${parents[@]}"); do
	checked=$((checked + 1))
	problems=()
	n=0
	while IFS= read -r line || [ -n "$line" ]; do
		n=$((n + 1))
		if [ $n -eq 1 ]; then
			[ -n "$line" ] || problems+=("the subject is empty")
			[ ${#line} -le 72 ] || problems+=("the subject is ${#line} characters (at most 72)")
		elif [ $n -eq 2 ]; then
			[ -z "$line" ] || problems+=("line 2 is not blank (a blank line goes between the subject and the body)")
		elif [ ${#line} -gt 72 ] && [[ $line != [[:space:]]* ]] && [[ $line == *" "* ]]; then
			problems+=("line $n is ${#line} characters (at most 72; only an indented line or a single word may be longer)")
		fi
	done < <(git log -1 --format=%B "$c" | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}')
	if [ ${#problems[@]} -gt 0 ]; then
		bad=$((bad + 1))
		printf '%s %s\n' "$(git rev-parse --short "$c")" "$(git log -1 --format=%s "$c" | cut -c1-60)"
		printf '    %s\n' "${problems[@]}"
	fi
done

if [ $bad -gt 0 ]; then
	die "$bad of $checked commit messages since $base break the form (see docs/decisions.md, Commits)"
fi
log "$checked commit messages since $base keep the form"
