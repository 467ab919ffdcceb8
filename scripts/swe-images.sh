#!/usr/bin/env bash
# Build the local container images of the offline SWE sample suite
# (datasets/swe-mini): a Debian bookworm base with git and python3, and one
# image per task with the task's tiny repository committed at /testbed.
# Nothing is pulled from a registry. Images that exist are kept (pass
# --rebuild to replace them).
#
#   scripts/swe-images.sh            # build what is missing
#   scripts/swe-images.sh --rebuild  # rebuild the task images (the base is kept)
#   scripts/swe-images.sh --check    # exit 0 when every image exists, 1 otherwise
#
# Needs: a docker daemon (scripts/dockerd.sh start), and for the base image
# debootstrap (apt-get install debootstrap) and the Debian mirror configured
# for apt on this machine, which is read from /etc/apt at run time.
#
# Environment:
#   DOCKER_HOST         daemon socket (default: the docker CLI's default)
#   SWE_BASE_IMAGE      base image name (default hermes-pipe-swe/base:bookworm)
#   SWE_MIRROR          Debian mirror URL (default: the one apt uses)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
suite=$here/datasets/swe-mini
base=${SWE_BASE_IMAGE:-hermes-pipe-swe/base:bookworm}
rebuild=0
check=0
case "${1:-}" in
--rebuild) rebuild=1 ;;
--check) check=1 ;;
"") ;;
*)
	echo "usage: $0 [--rebuild|--check]" >&2
	exit 2
	;;
esac

log() { printf 'swe-images.sh: %s\n' "$*" >&2; }
have() { docker image inspect "$1" >/dev/null 2>&1; }

# The task images: one folder per task under repos/, image name from images.txt
# ("<folder> <image>" per line).
mapfile -t lines < <(grep -v '^[[:space:]]*\(#\|$\)' "$suite/images.txt")

if [ "$check" = 1 ]; then
	have "$base" || { log "missing $base"; exit 1; }
	for l in "${lines[@]}"; do
		set -- $l
		have "$2" || { log "missing $2"; exit 1; }
	done
	exit 0
fi

# mirror prints the Debian mirror apt is configured with (deb822 or one-line
# sources), skipping the security archive.
mirror() {
	if [ -n "${SWE_MIRROR:-}" ]; then
		echo "$SWE_MIRROR"
		return
	fi
	local f u
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		u=$(awk '/^URIs:/ {for (i = 2; i <= NF; i++) print $i}' "$f" | grep -v security | grep '/debian/\?$' | head -n1 || true)
		[ -n "$u" ] && { echo "$u"; return; }
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		u=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; break } }' "$f" | grep -v security | grep '/debian/\?$' | head -n1 || true)
		[ -n "$u" ] && { echo "$u"; return; }
	done
	return 1
}

build_base() {
	if have "$base"; then
		return 0
	fi
	command -v debootstrap >/dev/null || { log "debootstrap not installed (apt-get install debootstrap)"; return 1; }
	local url root rc=0
	url=$(mirror) || { log "no Debian mirror found in /etc/apt; set SWE_MIRROR"; return 1; }
	root=$(mktemp -d "${TMPDIR:-/tmp}/swe-rootfs.XXXXXX")
	log "debootstrap bookworm (minbase + git, python3) into $root"
	if ! debootstrap --variant=minbase --include=git,python3-minimal bookworm "$root" "$url" >"$root.log" 2>&1; then
		log "debootstrap failed; last lines of $root.log:"
		tail -n 20 "$root.log" >&2
		rm -rf "$root"
		return 1
	fi
	# Smaller image: drop apt lists, caches and docs.
	rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/*
	tar -C "$root" -c . | docker import \
		-c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		-c 'ENV LANG=C.UTF-8' -c 'CMD ["/bin/bash"]' - "$base" >/dev/null || rc=$?
	rm -rf "$root" "$root.log"
	[ "$rc" = 0 ] || { log "docker import failed"; return "$rc"; }
	log "built $base"
}

# build_task commits the task folder as the repository at /testbed with a
# fixed author, committer and date, so its base commit is the same hash on
# every machine (tasks.jsonl records it).
build_task() {
	local dir=$1 image=$2 name
	if have "$image" && [ "$rebuild" = 0 ]; then
		return 0
	fi
	name=swe-build-$(basename "$dir")-$$
	docker rm -f "$name" >/dev/null 2>&1 || true
	docker create --name "$name" --network none -w /testbed "$base" sh -ec "cd /testbed
$(cat "$here/scripts/swe-base-commit.sh")" >/dev/null
	docker cp "$dir/." "$name:/testbed" >/dev/null
	local head
	head=$(docker start -a "$name")
	docker commit -c 'WORKDIR /testbed' "$name" "$image" >/dev/null
	docker rm -f "$name" >/dev/null
	log "built $image (base commit $head)"
	local want
	want=$(grep -F "\"repo\": \"swe-mini/$(basename "$dir")\"" "$suite/tasks.jsonl" | sed -n 's/.*"base_commit": "\([0-9a-f]*\)".*/\1/p' || true)
	if [ -n "$want" ] && [ "$want" != "$head" ]; then
		log "$image: base commit $head differs from tasks.jsonl ($want): update the task"
		return 1
	fi
}

build_base
pids=()
for l in "${lines[@]}"; do
	set -- $l
	build_task "$suite/repos/$1" "$2" &
	pids+=($!)
done
rc=0
for p in "${pids[@]}"; do
	wait "$p" || rc=1
done
exit "$rc"
