#!/usr/bin/env bash
# deps.sh: install the Debian packages agentpen's build and tests need, if missing (make
# included, so `scripts/deps.sh && make test` works on a fresh Debian 12 machine), and check
# that Go 1.26 is there (it is not a Debian 12 package: install it from go.dev into /usr/local/go).
# python3 from Debian (/usr/bin/python3) is the interpreter the uid sandbox runs episode code
# with, and python3-venv lets `python3 -m venv` make the fresh venv that agentpen's Python
# client (clients/python) installs into (the tests install it there, offline); debootstrap
# builds the local python base image; the Docker packages are installed by
# scripts/rootless-docker.sh; gcc and libc6-dev are what go test -race needs (cgo); openssl
# makes API keys (openssl rand -hex 32); chromium-headless-shell is the browser the pages' tests
# drive (internal/testkit/browsertest); nodejs (with its npm) runs the TypeScript MCP SDK test;
# make lint runs shellcheck over the scripts. Run as root; a non-root run only reports what is
# missing.
set -euo pipefail
prog=deps
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
need=(python3 python3-venv debootstrap curl ca-certificates openssl make git gcc libc6-dev chromium-headless-shell nodejs shellcheck)
missing=()
for p in "${need[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
check_go() {
	local go
	go=$(command -v go || echo /usr/local/go/bin/go)
	if ! "$go" version >/dev/null 2>&1; then
		die "Go 1.26 is required: install it into /usr/local/go (https://go.dev/dl)"
	fi
}
if [ ${#missing[@]} -eq 0 ]; then
	check_go
	exit
fi
if [ "$(id -u)" -ne 0 ]; then
	die "missing Debian packages: ${missing[*]} (install them as root)"
fi
log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
check_go
