#!/usr/bin/env bash
# deps.sh: install the Debian packages agentpen's build and tests need, if missing (make
# included, so `scripts/deps.sh && make test` works on a fresh Debian 12 machine), and check
# that Go 1.26 is there (it is not a Debian 12 package: install it from go.dev into /usr/local/go).
# python3 from Debian (/usr/bin/python3) is the interpreter the uid sandbox runs episode code
# with; debootstrap builds the local python base image; the Docker packages are installed by
# scripts/rootless-docker.sh. Run as root; a non-root run only reports what is missing.
set -euo pipefail
need=(python3 debootstrap curl ca-certificates make git)
missing=()
for p in "${need[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
check_go() {
	local go
	go=$(command -v go || echo /usr/local/go/bin/go)
	if ! "$go" version >/dev/null 2>&1; then
		echo "deps: Go 1.26 is required: install it into /usr/local/go (https://go.dev/dl)" >&2
		return 1
	fi
}
if [ ${#missing[@]} -eq 0 ]; then
	check_go
	exit
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing Debian packages: ${missing[*]} (install them as root)" >&2
	exit 1
fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
check_go
