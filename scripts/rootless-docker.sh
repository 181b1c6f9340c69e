#!/usr/bin/env bash
# rootless-docker.sh: start, find, stop or report agentpen's rootless Docker daemon.
#
#   scripts/rootless-docker.sh [start]   start the daemon (or find the running one) and print
#                                        `export DOCKER_HOST=unix:///run/user/<uid>/docker.sock`
#   scripts/rootless-docker.sh status    say whether it runs; exit 0 if it answers /_ping
#   scripts/rootless-docker.sh stop      stop the daemon this script started (by recorded pid)
#   scripts/rootless-docker.sh env       print the export line only if the daemon answers
#
# Run as root on a fresh Debian 12 machine, `start` installs Debian's packages (docker.io,
# containerd, runc, rootlesskit, slirp4netns, uidmap, iptables), creates the unprivileged user
# $AGENTPEN_DOCKER_USER (default: agentpen) with subuid/subgid ranges, applies the three host
# fixes (/dev/net/tun usable, /usr/sbin on PATH, /run/user/<uid> as XDG_RUNTIME_DIR) and starts
# dockerd-rootless.sh as that user. It is idempotent: a second run finds the running daemon and
# prints the same line. Run by a non-root user, it only looks for that user's own rootless daemon.
#
# Only the export line goes to standard output, so `eval "$(scripts/rootless-docker.sh)"` works;
# progress goes to standard error. Nothing here pulls an image or touches a rootful daemon.
set -euo pipefail

user_name=${AGENTPEN_DOCKER_USER:-agentpen}
wait_seconds=${AGENTPEN_DOCKER_WAIT:-60}
packages=(docker.io containerd runc rootlesskit slirp4netns uidmap iptables curl ca-certificates)
rootless_sh=/usr/share/docker.io/contrib/dockerd-rootless.sh

prog=rootless-docker
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

# ping SOCKET: true when a daemon answers /_ping on the unix socket.
ping() {
	[ -S "$1" ] || return 1
	curl -fsS --max-time 3 --unix-socket "$1" http://localhost/_ping >/dev/null 2>&1
}

# target_uid: the uid whose daemon we manage.
target_uid() {
	if [ "$(id -u)" -eq 0 ]; then
		id -u "$user_name" 2>/dev/null || return 1
	else
		id -u
	fi
}

# running PID: true when PID exists and is not a zombie.
running() {
	local pid=$1 state
	[ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
	state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
	[ -n "$state" ] && [ "$state" != Z ]
}

# alive PID: true when PID is a running process of the daemon's tree (setsid, setpriv, env,
# dockerd-rootless.sh, then rootlesskit: each has dockerd-rootless.sh in its command line), so a
# stale pid file left by a killed daemon, or a pid reused by another program, is not mistaken for
# our daemon. Only for pids this script did not just start: during an exec the command line can
# read empty for an instant.
alive() {
	running "$1" && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q 'dockerd-rootless'
}

socket_of() { printf '/run/user/%s/docker.sock' "$1"; }
export_line() { printf 'export DOCKER_HOST=unix://%s\n' "$(socket_of "$1")"; }

install_packages() {
	local missing=()
	for p in "${packages[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ -x "$rootless_sh" ] || missing+=(docker.io)
	[ ${#missing[@]} -eq 0 ] && return 0
	log "installing Debian packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

ensure_user() {
	if ! id -u "$user_name" >/dev/null 2>&1; then
		log "creating user $user_name"
		useradd -m -s /usr/sbin/nologin "$user_name"
	fi
	local start
	for f in /etc/subuid /etc/subgid; do
		touch "$f"
		if ! grep -q "^${user_name}:" "$f"; then
			# The next free range after every range already handed out.
			start=$(awk -F: 'BEGIN{m=100000} {e=$2+$3; if (e>m) m=e} END{print m}' "$f")
			log "adding $f range $user_name:$start:65536"
			echo "${user_name}:${start}:65536" >>"$f"
		fi
	done
}

host_fixes() {
	local uid=$1
	# Fix 1: rootlesskit opens /dev/net/tun as the user for its tap device.
	if [ ! -c /dev/net/tun ]; then
		mkdir -p /dev/net
		mknod -m 0666 /dev/net/tun c 10 200
	fi
	chmod 0666 /dev/net/tun
	# Fix 3: no logind here, so the runtime directory is ours to make.
	install -d -m 0700 -o "$uid" -g "$(id -g "$user_name")" "/run/user/$uid"
}

# reap_orphans RUNTIME UID: a daemon tree killed without its containerd (containerd runs in a
# session of its own) leaves that containerd holding its socket, and the next start times out
# waiting for a containerd of its own; a dead one leaves its pid file, which dockerd takes for a
# live containerd. Stop it, by the pid dockerd recorded, if it is still a containerd of this user,
# and drop a pid file that names no running process.
reap_orphans() {
	local runtime=$1 uid=$2 pid i
	local pidfile=$runtime/docker/containerd/containerd.pid
	pid=$(cat "$pidfile" 2>/dev/null) || return 0
	if ! running "$pid"; then
		# Dead or a zombie not yet reaped: dockerd would take the pid for a live containerd
		# ("containerd is still running") and time out waiting for it.
		rm -f "$pidfile"
		return 0
	fi
	[ "$(stat -c %u "/proc/$pid" 2>/dev/null)" = "$uid" ] || return 0
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q '^containerd ' || return 0
	log "stopping containerd $pid left by a daemon that died"
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 40; i++)); do
		running "$pid" || return 0
		sleep 0.25
	done
	kill -KILL "$pid" 2>/dev/null || true
	rm -f "$pidfile"
}

start_daemon() {
	local uid home runtime sock pidfile
	uid=$(id -u "$user_name")
	home=$(getent passwd "$user_name" | cut -d: -f6)
	runtime=/run/user/$uid
	sock=$(socket_of "$uid")
	pidfile=$runtime/agentpen-rootless.pid
	if ping "$sock"; then
		log "daemon already running for $user_name (uid $uid)"
		export_line "$uid"
		return 0
	fi
	# A daemon that died leaves pid files that make the next start refuse.
	if [ -f "$pidfile" ] && alive "$(cat "$pidfile")"; then
		log "a daemon process $(cat "$pidfile") exists but does not answer yet; waiting for it"
	else
		reap_orphans "$runtime" "$uid"
		rm -f "$runtime/docker.pid" "$pidfile" "$sock"
		log "starting dockerd-rootless.sh as $user_name (uid $uid); log: $runtime/dockerd-rootless.log"
		# Fix 2: /usr/sbin and /sbin hold dockerd and iptables.
		setsid setpriv --reuid="$uid" --regid="$(id -g "$user_name")" --init-groups \
			env -i HOME="$home" USER="$user_name" LOGNAME="$user_name" XDG_RUNTIME_DIR="$runtime" \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			"$rootless_sh" >"$runtime/dockerd-rootless.log" 2>&1 </dev/null &
		echo $! >"$pidfile"
	fi
	local i
	for ((i = 0; i < wait_seconds * 4; i++)); do
		if ping "$sock"; then
			log "daemon answers on $sock"
			export_line "$uid"
			return 0
		fi
		if ! running "$(cat "$pidfile")"; then
			tail -n 20 "$runtime/dockerd-rootless.log" >&2 || true
			die "dockerd-rootless.sh exited; see $runtime/dockerd-rootless.log"
		fi
		sleep 0.25
	done
	tail -n 20 "$runtime/dockerd-rootless.log" >&2 || true
	die "no answer on $sock after ${wait_seconds}s"
}

cmd_start() {
	if [ "$(id -u)" -ne 0 ]; then
		local uid
		uid=$(id -u)
		ping "$(socket_of "$uid")" || die "no rootless daemon answers on $(socket_of "$uid"); start it yourself (dockerd-rootless-setuptool.sh) or run this script as root"
		export_line "$uid"
		return 0
	fi
	install_packages
	ensure_user
	host_fixes "$(id -u "$user_name")"
	start_daemon
}

cmd_status() {
	local uid
	uid=$(target_uid) || { log "user $user_name does not exist: not running"; return 1; }
	if ping "$(socket_of "$uid")"; then
		log "running: $(socket_of "$uid")"
		export_line "$uid"
		return 0
	fi
	log "not running (no answer on $(socket_of "$uid"))"
	return 1
}

cmd_env() {
	local uid
	uid=$(target_uid) || die "user $user_name does not exist"
	ping "$(socket_of "$uid")" || die "no daemon answers on $(socket_of "$uid")"
	export_line "$uid"
}

cmd_stop() {
	local uid pidfile pid i
	uid=$(target_uid) || { log "user $user_name does not exist: nothing to stop"; return 0; }
	pidfile=/run/user/$uid/agentpen-rootless.pid
	if [ ! -f "$pidfile" ]; then
		log "no recorded daemon for uid $uid: nothing to stop"
		return 0
	fi
	pid=$(cat "$pidfile")
	if alive "$pid"; then
		log "stopping rootlesskit tree $pid"
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 40; i++)); do
			running "$pid" || break
			sleep 0.25
		done
		running "$pid" && die "process $pid did not exit after SIGTERM"
	fi
	rm -f "$pidfile"
	log "stopped"
}

case "${1:-start}" in
start) cmd_start ;;
status) cmd_status ;;
stop) cmd_stop ;;
env) cmd_env ;;
-h | --help | help) usage ;;
*)
	usage
	exit 2
	;;
esac
