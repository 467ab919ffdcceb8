#!/usr/bin/env bash
# Start or stop a private dockerd for the docker sandbox tests and build the
# test images: busybox, and busybox with this machine's bash as sh.
# Installs nothing: needs the dockerd, docker, busybox (static) and bash
# binaries already on the machine.
#
#   scripts/dockerd.sh start   # starts dockerd unless one answers, builds the test images
#   scripts/dockerd.sh stop    # stops the dockerd this script started (by pid)
#   scripts/dockerd.sh image   # builds the missing test images only
#
# Environment:
#   HERMES_DOCKERD_DIR   state folder (default /tmp/hermes-dockerd): data-root,
#                        exec-root, pid file and log live here
#   DOCKER_HOST          socket to use (default unix:///var/run/docker.sock)
#   HERMES_TEST_IMAGE    test image name (default hermes-pipe-test/busybox:latest)
#   HERMES_TEST_BASH_IMAGE  bash test image name (default hermes-pipe-test/bash:latest)
set -euo pipefail

dir=${HERMES_DOCKERD_DIR:-/tmp/hermes-dockerd}
host=${DOCKER_HOST:-unix:///var/run/docker.sock}
image=${HERMES_TEST_IMAGE:-hermes-pipe-test/busybox:latest}
bash_image=${HERMES_TEST_BASH_IMAGE:-hermes-pipe-test/bash:latest}
pidfile=$dir/dockerd.pid
export DOCKER_HOST=$host

log() { printf 'dockerd.sh: %s\n' "$*" >&2; }

ping() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

find_busybox() {
	local b
	for b in /bin/busybox /usr/bin/busybox; do
		if [ -x "$b" ] && file -L "$b" 2>/dev/null | grep -q 'statically linked'; then
			echo "$b"
			return 0
		fi
	done
	for b in /bin/busybox /usr/bin/busybox; do
		[ -x "$b" ] && { echo "$b"; return 0; }
	done
	return 1
}

# build_image NAME [bash]: an image of busybox's applets; with "bash", this
# machine's bash (and the libraries it links) is /bin/bash and /bin/sh.
build_image() {
	local name=$1 with_bash=${2:-}
	if docker image inspect "$name" >/dev/null 2>&1; then
		return 0
	fi
	local bb rootfs
	bb=$(find_busybox) || { log "busybox binary not found (install busybox-static)"; return 1; }
	rootfs=$(mktemp -d "${TMPDIR:-/tmp}/hermes-rootfs.XXXXXX")
	mkdir -p "$rootfs/bin" "$rootfs/tmp" "$rootfs/etc" "$rootfs/root" "$rootfs/proc" "$rootfs/dev" "$rootfs/sys"
	chmod 1777 "$rootfs/tmp"
	cp "$bb" "$rootfs/bin/busybox"
	# busybox --install needs /proc/self/exe to resolve; chroot is not
	# needed: install the applet links by listing them.
	local applet
	for applet in $("$bb" --list); do
		[ "$applet" = busybox ] && continue
		ln -sf busybox "$rootfs/bin/$applet"
	done
	if [ -n "$with_bash" ]; then
		local b lib
		b=$(command -v bash) || { log "bash not found"; rm -rf "$rootfs"; return 1; }
		rm -f "$rootfs/bin/bash" "$rootfs/bin/sh"
		cp "$b" "$rootfs/bin/bash"
		for lib in $(ldd "$b" | grep -o '/[^ ]*'); do
			mkdir -p "$rootfs$(dirname "$lib")"
			cp -L "$lib" "$rootfs$lib"
		done
		ln -s bash "$rootfs/bin/sh"
	fi
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$rootfs/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
	local rc=0
	tar -C "$rootfs" -c . | docker import -c 'ENV PATH=/bin' -c 'CMD ["/bin/sh"]' - "$name" >/dev/null || rc=$?
	rm -rf "$rootfs"
	[ "$rc" = 0 ] || { log "docker import failed"; return "$rc"; }
	log "built $name"
}

build_images() {
	build_image "$image"
	build_image "$bash_image" bash
}

start() {
	if ping; then
		log "a daemon already answers on $DOCKER_HOST"
		build_images
		return 0
	fi
	command -v dockerd >/dev/null || { log "dockerd not installed"; return 1; }
	mkdir -p "$dir"
	local sock=${host#unix://}
	dockerd --bridge=none --iptables=false --ip-forward=false \
		--data-root "$dir/data" --exec-root "$dir/exec" \
		--pidfile "$dir/dockerd.internal.pid" \
		--host "$host" >"$dir/dockerd.log" 2>&1 &
	echo $! >"$pidfile"
	local i
	for i in $(seq 1 300); do
		if ping; then
			log "dockerd running (pid $(cat "$pidfile"), socket $sock)"
			build_images
			return 0
		fi
		if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
			log "dockerd exited; last log lines:"
			tail -n 20 "$dir/dockerd.log" >&2
			rm -f "$pidfile"
			return 1
		fi
		sleep 0.1
	done
	log "dockerd did not answer within 30s; see $dir/dockerd.log"
	return 1
}

stop() {
	[ -f "$pidfile" ] || { log "no pid file $pidfile: nothing to stop"; return 0; }
	local pid
	pid=$(cat "$pidfile")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid"
		local i
		for i in $(seq 1 150); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
	fi
	rm -f "$pidfile"
	log "dockerd (pid $pid) stopped"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
image) build_images ;;
*)
	echo "usage: $0 start|stop|image" >&2
	exit 2
	;;
esac
