#!/usr/bin/env bash
# cosign-check.sh: the opt-in third verification of agentpen's signed
# reports. Builds cosign (v2, from the Go module proxy: about ten minutes
# the first time) into a cache outside the repository, then runs
# custody's TestCosign with it: cosign verify-blob-attestation --key PUB
# --insecure-ignore-tlog=true must accept every report of a signed
# campaign, and refuse a changed report and another key.
# Not part of make test. Usage: scripts/cosign-check.sh (or make cosign-check)
set -euo pipefail
version="${COSIGN_VERSION:-v2.6.5}"
cache="${AGENTPEN_COSIGN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentpen/cosign}"
bin="$cache/cosign"
if [[ ! -x "$bin" ]]; then
	echo "building cosign $version into $cache (about ten minutes)" >&2
	mkdir -p "$cache"
	GOBIN="$cache" GOFLAGS=-buildvcs=false go install "github.com/sigstore/cosign/v2/cmd/cosign@$version"
fi
"$bin" version 2>/dev/null | grep -E 'GitVersion' >&2 || true
cd "$(dirname "$0")/.."
AGENTPEN_COSIGN="$bin" go test -count=1 -run '^TestCosign$' -v ./custody
