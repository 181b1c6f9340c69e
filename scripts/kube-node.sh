#!/usr/bin/env bash
# kube-node.sh: a single-node Kubernetes cluster on this machine, for agentpen's cluster tests
# (make kube-node, make kube-test; docs/kubernetes.md). Run as root.
#
#   scripts/kube-node.sh build    build what is missing from the cache, and nothing else
#   scripts/kube-node.sh start    build if needed, start the node, wait until it is Ready and
#                                 print `export KUBECONFIG=<file>` (the only line on stdout)
#   scripts/kube-node.sh stop     stop everything start started, restore every host change it
#                                 recorded, and verify the host is as before
#   scripts/kube-node.sh status   say whether the node runs and is Ready (prints the export line)
#   scripts/kube-node.sh images   import the images into the running node again (after make images)
#   scripts/kube-node.sh env      print the variables that select the running node for agentpen
#                                 (eval "$(scripts/kube-node.sh env)"; make run KUBE=1 does)
#
# The node: etcd (Debian's etcd-server) and kube-apiserver (RBAC; an admin token in the
# kubeconfig, group system:masters) on 127.0.0.1; a kube-controller-manager running only the
# namespace controller, so a deleted namespace finishes; containerd 2 with runc (user namespaces:
# `hostUsers: false` pods run) and restrict_oom_score_adj (root here lacks CAP_SYS_RESOURCE);
# the CNI bridge (Debian's plugins, bridge cni0 on 10.88.0.0/16, no NAT); a kubelet with node name
# `localhost`. No scheduler (pods name nodeName), no kube-proxy, no DNS, no ServiceAccount
# controllers (a test makes its namespace's `default` ServiceAccount). start imports the images
# agentpen/python-base:bookworm and $WORKBENCH_IMAGE (default agentpen/workbench:dev) from the
# rootless Docker daemon (docker save only; the daemon must be running) and a pause image made
# here, and installs the workspace seccomp profile (docker.WorkspaceSeccomp) as the kubelet
# Localhost profile agentpen/workspace.json.
#
# Builds are cached under $KUBE_NODE_CACHE (default /var/cache/agentpen-k8s), one directory per
# component and version, never rebuilt once there: kube-apiserver, kubelet and
# kube-controller-manager v1.37.2 (Go module proxy, one go build, version stamped), containerd
# v2.4.2 with its runc shim and ctr, runc v1.5.3 (two scratch modules). The logs of the last run
# are kept in $KUBE_NODE_CACHE/logs after stop.
#
# Host changes: before anything starts, start records the host's state that the node may change
# (sysctls, iptables and ip6tables, mounts, network links, cgroups, paths the kubelet and
# containerd create) in /run/agentpen-k8s; stop removes what appeared (only the node's own:
# KUBE-/CNI- chains, mounts under its directories, cni0 and its veths, kubepods cgroups), writes
# back every recorded sysctl that differs, and checks the result. A machine-wide lock
# (flock on /run/agentpen-k8s.lock) serializes start and stop. start and stop are idempotent:
# a start finds a running node (and stops one left half made before it starts again); a stop
# with nothing recorded does nothing but name any of the node's ports something else holds.
#
# Exit codes:
#   0  done (status: the node runs and is Ready)
#   1  failed (start stops what it started before it exits, or exits 5 if it cannot);
#      status: a node is recorded but not whole (run stop)
#   2  usage, or not root
#   3  the lock is held by another start or stop for longer than $KUBE_NODE_LOCK_WAIT s (600)
#   4  something the node needs is taken: a port (6443, 23790, 23800, 10248, 10250, 10257) or
#      the cni0 link; nothing was started
#   5  stop could not restore the host: what is left is listed on stderr
#   6  status: not running
set -euo pipefail
cd "$(dirname "$0")/.."

prog=kube-node
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

k8s_version=${KUBE_NODE_K8S_VERSION:-1.37.2}
containerd_version=${KUBE_NODE_CONTAINERD_VERSION:-2.4.2}
runc_version=${KUBE_NODE_RUNC_VERSION:-1.5.3}
cache=${KUBE_NODE_CACHE:-/var/cache/agentpen-k8s}
lock_wait=${KUBE_NODE_LOCK_WAIT:-600}
workbench_image=${WORKBENCH_IMAGE:-agentpen/workbench:dev}
python_base=agentpen/python-base:bookworm
export PATH=/usr/local/go/bin:$PATH
export GOTOOLCHAIN=local

k8s_dir=$cache/kubernetes-$k8s_version
containerd_dir=$cache/containerd-$containerd_version
runc_dir=$cache/runc-$runc_version

# Where the node lives while it runs: run (tmpfs: pids, certificates, kubeconfig, etcd's data,
# containerd's state, the record of host changes) and lib (disk: containerd's images, the
# kubelet's root). Both are removed at stop.
run=/run/agentpen-k8s
lib=/var/lib/agentpen-k8s
lockfile=/run/agentpen-k8s.lock
logs=$cache/logs
api_port=6443 etcd_port=23790 etcd_peer_port=23800 kubelet_port=10250 kubelet_healthz=10248 kcm_port=10257
ports=("$api_port" "$etcd_port" "$etcd_peer_port" "$kubelet_port" "$kubelet_healthz" "$kcm_port")
bridge=cni0
pod_subnet=10.88.0.0/16
node=localhost
# profile: the workspaces' Localhost seccomp profile, relative to the kubelet's seccomp root
# (kuberig.SeccompProfile).
profile=agentpen/workspace.json
ctrd_sock=$run/containerd/containerd.sock
# The sysctls the kubelet (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops) and the
# bridge plugin (forwarding, and with it accept_redirects) change, and their neighbours.
sysctl_re='^(kernel\.(panic|panic_on_oops|keys\.root_max(keys|bytes))|vm\.(overcommit_memory|panic_on_oom)|net\.ipv4\.ip_forward|net\.ipv4\.conf\.(all|default|lo|eth[0-9]+)\.[a-z_]+|net\.ipv6\.conf\.(all|default)\.(forwarding|accept_ra|accept_redirects)|net\.bridge\..*) ='
# Paths the kubelet or containerd may create outside run and lib whatever they are told; stop
# removes those that did not exist before start.
host_paths=(/var/lib/kubelet /var/log/pods /var/log/containers /var/lib/cni /run/netns /var/run/netns
	/etc/cni /opt/cni /opt/containerd /etc/kubernetes /var/lib/containerd /run/containerd /run/nri /var/run/nri
	/etc/containerd/certs.d /var/lib/nri /etc/nri)

# since T0: seconds elapsed, for progress lines.
since() { echo "$((SECONDS - $1))s"; }

need_root() { [ "$(id -u)" -eq 0 ] || { log "error: run as root"; exit 2; }; }

# apt_need PKG...: install the Debian packages that are missing (output in the cache's apt.log).
apt_need() {
	local p need=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
	done
	[ ${#need[@]} -eq 0 ] && return 0
	log "installing Debian packages: ${need[*]}"
	mkdir -p "$cache"
	export DEBIAN_FRONTEND=noninteractive
	{ apt-get install -y -qq --no-install-recommends "${need[@]}" >"$cache/apt.log" 2>&1 ||
		{ apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}"; } >"$cache/apt.log" 2>&1; } ||
		{ tail -n 20 "$cache/apt.log" >&2; die "apt-get install ${need[*]} failed"; }
}

# scratch_module DIR NAME: an empty module DIR/src named NAME (replaced whole).
scratch_module() {
	rm -rf "$1/src"
	mkdir -p "$1/src"
	printf 'module %s\n\ngo 1.26\n' "$2" >"$1/src/go.mod"
}

# missing DIR NAME...: print the NAMEs that are not executables in DIR.
missing() {
	local d=$1 n
	shift
	for n in "$@"; do [ -x "$d/$n" ] || echo "$n"; done
}

# build_kubernetes: kube-apiserver, kubelet and kube-controller-manager of k8s.io/kubernetes
# into k8s_dir, whichever are missing in one go build (no faster than one build each with the
# same build cache, which shares their packages either way: docs/kubernetes.md), with the
# version stamp (else they report v0.0.0-master and clients that parse
# the server version fail). k8s.io/kubernetes replaces its staging modules (k8s.io/api, ...)
# by directories the module proxy does not serve: the scratch module replaces them by their
# published v0.<minor>.<patch> versions.
build_kubernetes() {
	local t0=$SECONDS work=$k8s_dir.build c m minor pkgs=() cmds
	mapfile -t cmds < <(missing "$k8s_dir" kube-apiserver kubelet kube-controller-manager)
	[ ${#cmds[@]} -eq 0 ] && return 0
	scratch_module "$work" k8sbuild
	minor=$(echo "$k8s_version" | cut -d. -f2)
	log "building ${cmds[*]} v$k8s_version from the Go module proxy (cold: about 12 min on 2 cores, longer under load)"
	(
		cd "$work/src"
		go mod download -json "k8s.io/kubernetes@v$k8s_version" >/dev/null
		m=$(go env GOMODCACHE)/k8s.io/kubernetes@v$k8s_version
		{
			echo "require k8s.io/kubernetes v$k8s_version"
			echo 'replace ('
			grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging' "$m/go.mod" |
				awk -v v="0.${k8s_version#1.}" '{print "\t" $1 " => " $1 " v" v}'
			echo ')'
			echo 'tool ('
			for c in "${cmds[@]}"; do echo "	k8s.io/kubernetes/cmd/$c"; done
			echo ')'
		} >>go.mod
		go mod tidy 2>/dev/null
		log "kubernetes modules ready after $(since "$t0")"
		for c in "${cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
		mkdir -p "$work/bin"
		CGO_ENABLED=0 nice -n 10 go build -trimpath -o "$work/bin/" -ldflags "-s -w \
			-X k8s.io/component-base/version.gitVersion=v$k8s_version \
			-X k8s.io/component-base/version.gitMajor=${k8s_version%%.*} \
			-X k8s.io/component-base/version.gitMinor=$minor \
			-X k8s.io/component-base/version.gitTreeState=clean" "${pkgs[@]}"
	) || die "building kubernetes v$k8s_version failed"
	mkdir -p "$k8s_dir"
	for c in "${cmds[@]}"; do mv "$work/bin/$c" "$k8s_dir/$c"; done
	rm -rf "$work"
	log "built ${cmds[*]} v$k8s_version in $(since "$t0")"
}

# build_containerd: containerd, containerd-shim-runc-v2 (in bin/, which start puts first on
# containerd's PATH: containerd finds the shim there) and ctr into containerd_dir.
build_containerd() {
	local t0=$SECONDS work=$containerd_dir.build m=github.com/containerd/containerd/v2 c cmds pkgs=()
	mapfile -t cmds < <(missing "$containerd_dir" containerd bin/containerd-shim-runc-v2 ctr)
	[ ${#cmds[@]} -eq 0 ] && return 0
	scratch_module "$work" ctrdbuild
	for c in "${cmds[@]}"; do pkgs+=("$m/cmd/${c#bin/}"); done
	log "building ${cmds[*]} v$containerd_version from the Go module proxy (cold: about 3 min)"
	(
		cd "$work/src"
		go get -tool "${pkgs[@]/%/@v$containerd_version}" 2>/dev/null
		mkdir -p "$work/bin"
		CGO_ENABLED=0 nice -n 10 go build -trimpath -o "$work/bin/" -ldflags "-s -w \
			-X $m/version.Version=v$containerd_version" "${pkgs[@]}"
	) || die "building containerd v$containerd_version failed"
	mkdir -p "$containerd_dir/bin"
	for c in "${cmds[@]}"; do mv "$work/bin/${c#bin/}" "$containerd_dir/$c"; done
	rm -rf "$work"
	log "built ${cmds[*]} v$containerd_version in $(since "$t0")"
}

# build_runc: runc (cgo, with seccomp: libseccomp-dev) into runc_dir; a module of its own, so
# that its dependencies are the versions runc was tested with, not containerd's.
build_runc() {
	local t0=$SECONDS work=$runc_dir.build
	[ -x "$runc_dir/runc" ] && return 0
	scratch_module "$work" runcbuild
	log "building runc v$runc_version from the Go module proxy (cold: about 1 min)"
	(
		cd "$work/src"
		go get -tool "github.com/opencontainers/runc@v$runc_version" 2>/dev/null
		CGO_ENABLED=1 nice -n 10 go build -trimpath -tags seccomp -o "$work/runc" -ldflags "-s -w \
			-X main.version=$runc_version" github.com/opencontainers/runc
	) || die "building runc v$runc_version failed"
	mkdir -p "$runc_dir"
	mv "$work/runc" "$runc_dir/runc"
	rm -rf "$work"
	log "built runc v$runc_version in $(since "$t0")"
}

# pause_src: the pause container, a static Go program that waits for SIGINT or SIGTERM (there
# is no registry to pull registry.k8s.io/pause from).
pause_src() {
	cat <<'GO'
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
	<-c
}
GO
}

# build_pause: pause_dir/pause.tar, a docker-save archive of localhost/pause:local holding only
# the static binary; keyed by the source and the Go version.
build_pause() {
	local key d
	key=$( (pause_src && go version) | sha256sum | cut -c1-16)
	pause_dir=$cache/pause-$key
	[ -s "$pause_dir/pause.tar" ] && return 0
	d=$pause_dir.build
	rm -rf "$d" && mkdir -p "$d/src" "$d/rootfs" "$d/img"
	pause_src >"$d/src/main.go"
	printf 'module pause\n\ngo 1.26\n' >"$d/src/go.mod"
	(cd "$d/src" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$d/rootfs/pause" .) || die "building the pause image failed"
	tar --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$d/rootfs" -cf "$d/img/layer.tar" pause
	local layer cfg cfgsum
	layer=$(sha256sum "$d/img/layer.tar" | cut -d' ' -f1)
	cfg=$(printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$layer")
	cfgsum=$(printf '%s' "$cfg" | sha256sum | cut -d' ' -f1)
	printf '%s' "$cfg" >"$d/img/$cfgsum.json"
	printf '[{"Config":"%s.json","RepoTags":["localhost/pause:local"],"Layers":["layer.tar"]}]' "$cfgsum" >"$d/img/manifest.json"
	tar --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$d/img" -cf "$d/pause.tar" .
	mkdir -p "$pause_dir"
	mv "$d/pause.tar" "$pause_dir/pause.tar"
	rm -rf "$d"
}

cmd_build() {
	local t0=$SECONDS
	need_root
	apt_need etcd-server containernetworking-plugins libseccomp-dev gcc libc6-dev pkg-config iptables nftables openssl curl jq
	build_runc
	build_containerd
	build_kubernetes
	build_pause
	log "build done in $(since "$t0")"
}

# --- host state ------------------------------------------------------------------------------

# record LINE: note in run/record what start did. The record's presence tells stop and status
# that a node was started; what to undo stop finds by comparing the host with run/before.
record() { printf '%s\n' "$*" >>"$run/record"; }

snap_sysctls() { sysctl -a 2>/dev/null | grep -E "$sysctl_re" | sort || true; }
snap_mounts() { awk '{print $5}' /proc/self/mountinfo | sort; }
snap_links() { ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | sort; }
snap_tables() { nft list tables 2>/dev/null | sort || true; }
# snap_chains: every iptables and ip6tables chain, as "<cmd> <table> <chain>".
snap_chains() {
	local c t
	for c in iptables ip6tables; do
		"$c-save" 2>/dev/null | awk -v c="$c" '/^\*/ {t=substr($0,2)} /^:/ {print c, t, substr($1,2)}'
	done | sort
}
snap_cgroups() { find /sys/fs/cgroup -mindepth 2 -maxdepth 2 -type d 2>/dev/null | sort; }

# snapshot: the host's state before start, in run/before.
snapshot() {
	local p
	mkdir -p "$run/before"
	snap_sysctls >"$run/before/sysctls"
	snap_mounts >"$run/before/mounts"
	snap_links >"$run/before/links"
	snap_tables >"$run/before/tables"
	snap_chains >"$run/before/chains"
	snap_cgroups >"$run/before/cgroups"
	for p in "${host_paths[@]}"; do [ -e "$p" ] || [ -L "$p" ] || echo "$p"; done >"$run/before/absent-paths"
}

# --- processes -------------------------------------------------------------------------------

# alive NAME: true when the process start recorded as NAME runs (not a zombie) and is still the
# program it started (its /proc/PID/exe), so a reused pid is never taken for it.
alive() {
	local pid exe state
	pid=$(cat "$run/$1.pid" 2>/dev/null) || return 1
	exe=$(cat "$run/$1.exe" 2>/dev/null) || return 1
	state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
	[ "$state" != Z ] && [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ]
}

# launch NAME EXE ARGS...: start EXE in a session of its own, logging to run/NAME.log, and
# record its pid and executable.
launch() {
	local name=$1 exe=$2 pid i
	shift 2
	# 9>&-: the lock's descriptor stays with this script (a daemon holding it would hold
	# the lock for as long as it runs).
	setsid "$exe" "$@" >"$run/$name.log" 2>&1 </dev/null 9>&- &
	pid=$!
	echo "$pid" >"$run/$name.pid"
	readlink -f "$exe" >"$run/$name.exe"
	record "process $name"
	# setsid execs EXE in the same process: wait for the exec, so alive sees EXE.
	for ((i = 0; i < 40; i++)); do
		[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(cat "$run/$name.exe")" ] && return 0
		sleep 0.05
	done
}

# halt NAME: stop the recorded process NAME (SIGTERM, then SIGKILL after 20 s) and wait for it.
halt() {
	local name=$1 pid i
	alive "$name" || return 0
	pid=$(cat "$run/$name.pid")
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 80; i++)); do
		alive "$name" || return 0
		sleep 0.25
	done
	log "$name ($pid) ignored SIGTERM for 20 s: SIGKILL"
	kill -KILL "$pid" 2>/dev/null || true
	for ((i = 0; i < 40; i++)); do
		alive "$name" || return 0
		sleep 0.25
	done
	log "error: $name ($pid) did not exit"
	return 1
}

# wait_until WHAT SECONDS NAME CMD...: poll CMD every 0.25 s until it succeeds; fail (showing
# NAME's log) after SECONDS or when the process NAME exits.
wait_until() {
	local what=$1 secs=$2 name=$3 i
	shift 3
	for ((i = 0; i < secs * 4; i++)); do
		"$@" && return 0
		if [ -n "$name" ] && ! alive "$name"; then
			tail -n 20 "$run/$name.log" >&2 || true
			die "$name exited while waiting for $what"
		fi
		sleep 0.25
	done
	[ -z "$name" ] || tail -n 20 "$run/$name.log" >&2 || true
	die "no $what after ${secs}s"
}

port_busy() { ss -Htln "sport = :$1" | grep -q .; }

# api PATH [CURL ARGS...]: a request to the API server with the admin token.
api() {
	local path=$1
	shift
	curl -sSf --max-time 10 --cacert "$run/pki/ca.crt" -H "Authorization: Bearer $(cat "$run/pki/token")" \
		"$@" "https://127.0.0.1:$api_port$path"
}

api_quiet() { api "$@" -o /dev/null 2>/dev/null; }

node_ready() {
	api "/api/v1/nodes/$node" 2>/dev/null |
		jq -e '.status.conditions[] | select(.type == "Ready") | .status == "True"' >/dev/null 2>&1
}

export_line() { printf 'export KUBECONFIG=%s\n' "$run/kubeconfig"; }

# --- start -----------------------------------------------------------------------------------

# pki: a CA, the API server's serving certificate (127.0.0.1 and localhost), the service-account
# signing key and the admin token, in run/pki.
pki() {
	local p=$run/pki
	mkdir -p "$p"
	chmod 700 "$p"
	openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=agentpen-kube-node-ca \
		-keyout "$p/ca.key" -out "$p/ca.crt" 2>/dev/null
	openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout "$p/apiserver.key" -out "$p/apiserver.csr" 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc,IP:10.96.0.1\n' >"$p/san.ext"
	openssl x509 -req -in "$p/apiserver.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -days 30 \
		-extfile "$p/san.ext" -out "$p/apiserver.crt" 2>/dev/null
	openssl genrsa -out "$p/sa.key" 2048 2>/dev/null
	openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
	openssl rand -hex 32 >"$p/token"
	printf '%s,admin,admin,system:masters\n' "$(cat "$p/token")" >"$p/tokens.csv"
	(
		umask 077
		cat >"$run/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: kube-node
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority-data: $(base64 -w0 "$p/ca.crt")
users:
- name: admin
  user:
    token: $(cat "$p/token")
contexts:
- name: kube-node
  context: {cluster: kube-node, user: admin}
current-context: kube-node
KC
	)
}

start_control_plane() {
	local t0=$SECONDS
	launch etcd "$(command -v etcd)" --name kube-node --data-dir "$run/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
		--listen-peer-urls "http://127.0.0.1:$etcd_peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
		--initial-cluster "kube-node=http://127.0.0.1:$etcd_peer_port"
	launch kube-apiserver "$k8s_dir/kube-apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" \
		--bind-address=127.0.0.1 --secure-port="$api_port" \
		--tls-cert-file="$run/pki/apiserver.crt" --tls-private-key-file="$run/pki/apiserver.key" \
		--service-account-key-file="$run/pki/sa.pub" --service-account-signing-key-file="$run/pki/sa.key" \
		--service-account-issuer=https://kubernetes.default.svc --token-auth-file="$run/pki/tokens.csv" \
		--authorization-mode=RBAC --service-cluster-ip-range=10.96.0.0/16 \
		--kubelet-preferred-address-types=Hostname
	wait_until "API server ready" 120 kube-apiserver api_quiet /readyz
	log "etcd and kube-apiserver ready after $(since "$t0")"
	# Only the namespace controller: it deletes a terminating namespace's content and then the
	# namespace (nothing else is needed for that; no ServiceAccount or garbage collector).
	launch kube-controller-manager "$k8s_dir/kube-controller-manager" --kubeconfig="$run/kubeconfig" \
		--controllers=namespace-controller --leader-elect=false --bind-address=127.0.0.1 \
		--secure-port="$kcm_port" --cert-dir="$run/kcm"
}

start_containerd() {
	local t0=$SECONDS
	mkdir -p "$run/containerd" "$lib/containerd" "$run/cni/net.d" "$lib/containerd-opt"
	cat >"$run/containerd/config.toml" <<TOML
version = 3
root = "$lib/containerd"
state = "$run/containerd/state"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$ctrd_sock"

[plugins."io.containerd.internal.v1.opt"]
  path = "$lib/containerd-opt"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "localhost/pause:local"

[plugins."io.containerd.cri.v1.runtime"]
  enable_unprivileged_ports = true
  enable_unprivileged_icmp = true
  # Root here lacks CAP_SYS_RESOURCE: the pause container's oom_score_adj -998 kills runc's init.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$runc_dir/runc"
        Root = "$run/runc"
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$run/cni/net.d"

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
TOML
	PATH=$containerd_dir/bin:$PATH launch containerd "$containerd_dir/containerd" --config "$run/containerd/config.toml"
	wait_until "containerd socket" 60 containerd ctr_ version
	log "containerd ready after $(since "$t0")"
}

ctr_() { "$containerd_dir/ctr" --address "$ctrd_sock" --namespace k8s.io "$@" >/dev/null 2>&1; }

# import_images: the pause image and, from the rootless daemon (docker save only), the python
# base and the workbench image.
import_images() {
	local t0=$SECONDS img env
	ctr_ images import "$pause_dir/pause.tar" || die "ctr import of the pause image failed"
	env=$(scripts/rootless-docker.sh env) || die "the rootless Docker daemon does not answer: start it (make docker) and build the images (make images)"
	eval "$env"
	for img in "$python_base" "$workbench_image"; do
		docker image inspect "$img" >/dev/null 2>&1 || die "image $img is missing from the rootless daemon: make images WORKBENCH_IMAGE=$workbench_image"
		docker save "$img" | ctr_ images import - || die "importing $img failed (docker save | ctr images import -)"
	done
	log "images imported after $(since "$t0"): localhost/pause:local $python_base $workbench_image"
}

# seccomp_profile: the workspace's seccomp profile (docker.WorkspaceSeccomp: Docker's default
# plus the workbench's namespace calls) as the kubelet's Localhost profile agentpen/workspace.json.
seccomp_profile() {
	mkdir -p "$(dirname "$lib/kubelet/seccomp/$profile")"
	CGO_ENABLED=0 go run ./internal/testkit/kuberig/seccompprofile >"$lib/kubelet/seccomp/$profile" ||
		die "writing the workspace seccomp profile failed"
}

start_kubelet() {
	local t0=$SECONDS
	cat >"$run/cni/net.d/10-agentpen.conflist" <<JSON
{
  "cniVersion": "0.4.0",
  "name": "agentpen-kube-node",
  "plugins": [
    {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "$run/cni/ipam", "ranges": [[{"subnet": "$pod_subnet"}]]}},
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "loopback"}
  ]
}
JSON
	mkdir -p "$lib/kubelet" "$lib/pod-logs"
	cat >"$run/kubelet-config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$ctrd_sock
address: 127.0.0.1
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $kubelet_healthz
podLogsDir: $lib/pod-logs
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
failSwapOn: false
protectKernelDefaults: false
makeIPTablesUtilChains: false
allowedUnsafeSysctls: ["kernel.shmmax", "kernel.shmall"]
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
rotateCertificates: false
serverTLSBootstrap: false
YAML
	launch kubelet "$k8s_dir/kubelet" --config="$run/kubelet-config.yaml" --kubeconfig="$run/kubeconfig" \
		--root-dir="$lib/kubelet" --cert-dir="$run/kubelet-pki" --hostname-override="$node" --v=1
	wait_until "Ready node $node" 180 kubelet node_ready
	log "kubelet: node $node Ready after $(since "$t0")"
}

# restore_sysctls: write back every recorded sysctl whose value differs now; ip_forward first,
# since writing it sets every interface's forwarding.
restore_sysctls() {
	local key val now
	[ -s "$run/before/sysctls" ] || return 0
	{ grep '^net.ipv4.ip_forward =' "$run/before/sysctls" || true; grep -v '^net.ipv4.ip_forward =' "$run/before/sysctls"; } |
		while IFS= read -r line; do
			key=${line%% = *} val=${line#* = }
			now=$(sysctl -n "$key" 2>/dev/null | tr '\t' ' ') || continue
			[ "$now" = "$(echo "$val" | tr '\t' ' ')" ] && continue
			if sysctl -q -w "$key=$val" >/dev/null 2>&1; then
				log "restored $key = $val (was $now)"
			else
				log "could not restore $key = $val (is $now)"
			fi
		done
}

cmd_start() {
	local t0=$SECONDS p
	need_root
	if [ -f "$run/record" ]; then
		if alive kube-apiserver && alive kubelet && alive containerd && node_ready; then
			log "the node is running and Ready"
			export_line
			return 0
		fi
		log "a node that is not whole was left: stopping it first"
		teardown || exit 5
	fi
	for p in "${ports[@]}"; do port_busy "$p" && { log "error: port $p is taken (ss -tlnp 'sport = :$p')"; exit 4; }; done
	ip link show "$bridge" >/dev/null 2>&1 && { log "error: a link $bridge exists: another CNI bridge runs here"; exit 4; }
	cmd_build
	rm -rf "$run" "$lib"
	mkdir -p "$run" "$lib"
	# Traversable, not listable: the root of a hostUsers: false pod is a host uid of its own
	# mapping, and runc, running as it, must reach the container's rootfs under containerd's
	# state here ("remount-propagation ... permission denied" otherwise). The secrets are in
	# pki/ (0700) and the kubeconfig (0600).
	chmod 711 "$run"
	snapshot
	record "dir $run"
	record "dir $lib"
	trap 'log "start failed: stopping what it started"; teardown || exit 5; exit 1' EXIT
	pki
	start_control_plane
	start_containerd
	import_images
	seccomp_profile
	start_kubelet
	# The kubelet sets vm.overcommit_memory, kernel.panic and kernel.panic_on_oops once as it
	# starts (a panic on any oops would take the shared machine down): put them back now.
	restore_sysctls
	trap - EXIT
	log "node $node Ready in $(since "$t0") (KUBECONFIG=$run/kubeconfig)"
	export_line
}

# --- stop ------------------------------------------------------------------------------------

# delete_pods: delete every pod (grace 1 s) and wait until the kubelet has removed them (their
# sandboxes stopped through the CRI: netns, veths and mounts go with them).
delete_pods() {
	local i n
	alive kube-apiserver && alive kubelet || return 0
	api "/api/v1/pods" -o /dev/null 2>/dev/null || return 0
	api "/api/v1/pods" | jq -r '.items[] | .metadata.namespace + "/" + .metadata.name' | while IFS=/ read -r ns name; do
		api "/api/v1/namespaces/$ns/pods/$name" -X DELETE -H 'Content-Type: application/json' \
			-d '{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":1}' -o /dev/null || true
	done
	for ((i = 0; i < 240; i++)); do
		n=$(api "/api/v1/pods" | jq '.items | length') || break
		[ "$n" = 0 ] && return 0
		sleep 0.25
	done
	log "pods left after 60 s: removing their containers through containerd"
}

# remove_containers: kill and delete every task and container containerd still has.
remove_containers() {
	local c
	alive containerd || return 0
	for c in $("$containerd_dir/ctr" --address "$ctrd_sock" -n k8s.io tasks ls -q 2>/dev/null); do
		"$containerd_dir/ctr" --address "$ctrd_sock" -n k8s.io tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true
		"$containerd_dir/ctr" --address "$ctrd_sock" -n k8s.io tasks delete -f "$c" >/dev/null 2>&1 || true
	done
	for c in $("$containerd_dir/ctr" --address "$ctrd_sock" -n k8s.io containers ls -q 2>/dev/null); do
		"$containerd_dir/ctr" --address "$ctrd_sock" -n k8s.io containers rm "$c" >/dev/null 2>&1 || true
	done
}

# reap_shims: the runc shims containerd started (each in a session of its own) that outlived
# it, found by the socket address on their command line, and the containers they still run.
reap_shims() {
	local pid
	for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $ctrd_sock" || true); do
		[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "$containerd_dir/bin/containerd-shim-runc-v2")" ] || continue
		log "killing shim $pid and its children left by containerd"
		kill -KILL $(pgrep -P "$pid") "$pid" 2>/dev/null || true
	done
}

# ours PATH: true for a path under the node's own directories.
ours() { case "$1" in "$run" | "$run"/* | "$lib" | "$lib"/*) return 0 ;; esac; return 1; }

unmount_ours() {
	local m
	for m in $(comm -13 "$run/before/mounts" <(snap_mounts) | sort -r); do
		ours "$m" || case "$m" in /run/netns/cni-* | /var/run/netns/cni-* | /var/lib/kubelet*) ;; *) continue ;; esac
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
	done
}

# restore_iptables: remove the KUBE- and CNI- chains (and the rules that jump to them) that
# appeared since start, in iptables and ip6tables; then the nft tables that appeared and are
# empty of rules.
restore_iptables() {
	local c t ch rule
	while read -r c t ch; do
		case "$ch" in KUBE-* | CNI-*) ;; *) continue ;; esac
		"$c-save" -t "$t" 2>/dev/null | grep -E "^-A [A-Z-]+ .*-j $ch( |$)" | while read -r rule; do
			# shellcheck disable=SC2086 # a rule is words, as iptables-save prints it
			"$c" -t "$t" -D ${rule#-A } 2>/dev/null || true
		done
		"$c" -t "$t" -F "$ch" 2>/dev/null || true
	done < <(comm -13 "$run/before/chains" <(snap_chains))
	while read -r c t ch; do
		case "$ch" in KUBE-* | CNI-*) "$c" -t "$t" -X "$ch" 2>/dev/null || true ;; esac
	done < <(comm -13 "$run/before/chains" <(snap_chains))
	while read -r _ fam name; do
		nft list table "$fam" "$name" 2>/dev/null | grep -qE '^\s+(ip|meta|counter|jump|drop|accept|[a-z]+ (saddr|daddr))' && continue
		if nft delete table "$fam" "$name" 2>/dev/null; then log "removed the empty nft table $fam $name it made"; fi
	done < <(comm -13 "$run/before/tables" <(snap_tables))
}

restore_links() {
	local l
	for l in $(comm -13 "$run/before/links" <(snap_links)); do
		case "$l" in "$bridge" | veth*) ip link del "$l" 2>/dev/null || true ;; esac
	done
}

# remove_cgroups: the kubepods hierarchies that appeared, deepest first.
remove_cgroups() {
	local d
	for d in $(comm -13 "$run/before/cgroups" <(snap_cgroups)); do
		case "${d##*/}" in kubepods | kubepods.slice) find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true ;; esac
	done
}

remove_paths() {
	local p
	while read -r p; do
		[ -e "$p" ] || [ -L "$p" ] || continue
		rm -rf "$p" && log "removed $p, which the node made"
	done <"$run/before/absent-paths"
}

# verify: the host is as before start; prints what is not (and returns 1).
verify() {
	local bad=0 p x
	for p in "${ports[@]}"; do port_busy "$p" && { log "left: port $p still listens"; bad=1; }; done
	x=$(diff <(cat "$run/before/sysctls") <(snap_sysctls) | grep '^[<>]' || true)
	[ -z "$x" ] || { log "left: sysctls differ from before (< before, > now):"; echo "$x" >&2; bad=1; }
	for x in $(comm -13 "$run/before/mounts" <(snap_mounts)); do
		ours "$x" && { log "left: mount $x"; bad=1; }
		case "$x" in /run/netns/cni-* | /var/run/netns/cni-* | /var/lib/kubelet*) log "left: mount $x"; bad=1 ;; esac
	done
	ip link show "$bridge" >/dev/null 2>&1 && { log "left: link $bridge"; bad=1; }
	x=$(comm -13 "$run/before/chains" <(snap_chains) | grep -E ' (KUBE|CNI)-' || true)
	[ -z "$x" ] || { log "left: iptables chains: $x"; bad=1; }
	for x in $(comm -13 "$run/before/cgroups" <(snap_cgroups) | grep -E '/kubepods' || true); do
		log "left: cgroups: $(find "$x" -type d | tr '\n' ' ')"
		bad=1
	done
	while read -r p; do [ -e "$p" ] && { log "left: $p"; bad=1; }; done <"$run/before/absent-paths"
	pgrep -f "containerd-shim-runc-v2 .*-address $ctrd_sock" >/dev/null && { log "left: containerd shims"; bad=1; }
	return "$bad"
}

# teardown: stop everything of the record and restore the host; 1 when verify finds something
# left. Without a record there is nothing of ours to stop.
teardown() {
	local n rc=0
	[ -f "$run/record" ] || return 0
	delete_pods
	halt kube-controller-manager || rc=1
	halt kubelet || rc=1
	remove_containers
	halt containerd || rc=1
	reap_shims
	halt kube-apiserver || rc=1
	halt etcd || rc=1
	unmount_ours
	restore_links
	remove_cgroups
	restore_iptables
	restore_sysctls
	remove_paths
	if verify; then
		log "host restored: ports free, sysctls as before, no mounts, links, chains or cgroups of the node"
	else
		rc=1
	fi
	rm -rf "$logs"
	mkdir -p "$logs"
	for n in etcd kube-apiserver kube-controller-manager containerd kubelet; do
		[ -f "$run/$n.log" ] && cp "$run/$n.log" "$logs/"
	done
	if [ "$rc" -eq 0 ]; then
		rm -rf "$lib" "$run"
	else
		log "error: the host is not restored; the record stays in $run (logs in $logs)"
	fi
	return "$rc"
}

cmd_stop() {
	need_root
	if [ ! -f "$run/record" ]; then
		log "no node recorded: nothing to stop"
		local p
		for p in "${ports[@]}"; do port_busy "$p" && log "note: port $p listens (not a process of this script)"; done
		return 0
	fi
	teardown || exit 5
	log "stopped"
}

cmd_status() {
	if [ -f "$run/record" ] && alive kube-apiserver && alive kubelet && alive containerd && node_ready; then
		log "running: node $node Ready"
		export_line
		return 0
	fi
	if [ -f "$run/record" ]; then
		log "recorded but not whole (run: scripts/kube-node.sh stop)"
		return 1
	fi
	log "not running"
	return 6
}

# cmd_env: the variables agentpen's commands read for --kubeconfig, --kube-node and
# --kube-seccomp, for this node.
cmd_env() {
	cmd_status >/dev/null 2>&1 || { log "error: the node is not running (scripts/kube-node.sh start)"; exit 6; }
	printf 'export AGENTPEN_KUBECONFIG=%s AGENTPEN_KUBE_NODE=%s AGENTPEN_KUBE_SECCOMP=%s\n' "$run/kubeconfig" "$node" "$profile"
}

cmd_images() {
	cmd_status >/dev/null 2>&1 || { log "error: the node is not running (scripts/kube-node.sh start)"; exit 6; }
	build_pause
	import_images
}

# with_lock CMD: run CMD holding the machine-wide lock.
with_lock() {
	exec 9>>"$lockfile"
	flock -w "$lock_wait" 9 || { log "error: another start or stop holds $lockfile"; exit 3; }
	"$@"
}

case "${1:-}" in
build) with_lock cmd_build ;;
start) with_lock cmd_start ;;
stop) with_lock cmd_stop ;;
status) cmd_status ;;
images) with_lock cmd_images ;;
env) cmd_env ;;
-h | --help | help) usage ;;
*)
	usage
	exit 2
	;;
esac
