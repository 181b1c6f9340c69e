#!/usr/bin/env bash
# python-base.sh: build the local Debian + python3 base image without a registry.
#
#   scripts/python-base.sh            make sure agentpen/python-base:bookworm exists
#   scripts/python-base.sh --rebuild  debootstrap again and re-import
#
# The rootfs comes from `debootstrap --variant=minbase --include=python3 bookworm` (Debian's own
# packages, the only network this needs) and goes into the daemon with `docker import`. Both steps
# are cached: the filtered rootfs tarball under $AGENTPEN_CACHE (default /var/cache/agentpen), and
# the image itself, so a second run takes well under a second and a re-import a few seconds.
# DOCKER_HOST must name the rootless daemon (see scripts/rootless-docker.sh). Nothing is pulled.
set -euo pipefail

image=${AGENTPEN_PYTHON_BASE:-agentpen/python-base:bookworm}
cache=${AGENTPEN_CACHE:-/var/cache/agentpen}
mirror=${AGENTPEN_DEBIAN_MIRROR:-http://deb.debian.org/debian}
tarball=$cache/python-base-bookworm.tar
docker=${DOCKER:-docker}

prog=python-base
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
need_docker_host

rebuild=false
case "${1:-}" in
--rebuild) rebuild=true ;;
"") ;;
-h | --help)
	sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
	exit 0
	;;
*) die "unknown argument $1 (try --help)" ;;
esac

if ! $rebuild && "$docker" image inspect "$image" >/dev/null 2>&1; then
	log "$image exists"
	exit 0
fi

if $rebuild || [ ! -s "$tarball" ]; then
	[ "$(id -u)" -eq 0 ] || die "debootstrap needs root"
	if ! command -v debootstrap >/dev/null; then
		log "installing debootstrap"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2 ||
			{ apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2; }
	fi
	mkdir -p "$cache"
	work=$(mktemp -d "$cache/rootfs.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	log "debootstrap --variant=minbase --include=python3 bookworm (about 40 s)"
	debootstrap --variant=minbase --include=python3 bookworm "$work/root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
		{ tail -n 20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
	tar -C "$work/root" --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' \
		--exclude='./var/cache/apt/archives/*.deb' --exclude='./var/lib/apt/lists/*' \
		--exclude='./usr/share/doc/*' --exclude='./usr/share/locale/*' --exclude='./usr/share/man/*' \
		-cf "$tarball.tmp" .
	mv "$tarball.tmp" "$tarball"
	rm -rf "$work"
	trap - EXIT
fi

log "importing $tarball as $image"
"$docker" import -c 'CMD ["python3"]' -c 'ENV LANG=C.UTF-8' \
	-c 'LABEL io.agentpen.image=python-base' "$tarball" "$image" >/dev/null
"$docker" image inspect --format '{{.Id}}' "$image"
