#!/usr/bin/env bash
# Prepare the offline SWE sample suite (datasets/swe-mini) for
# `hermes-pipe swe --sandbox local`: the local sandbox has no task images, so
# each task works on a private clone of a git checkout on this machine.
#
#   scripts/swe-repos.sh DIR
#
# writes DIR/repos/<name>, one git checkout per task repository, committed
# with the fixed author, committer and date scripts/swe-images.sh uses (so
# its head is the task's base_commit, checked against tasks.jsonl), and
# DIR/tasks.jsonl: the suite's tasks with each task's cwd set to its
# checkout (matched through images.txt by the task's image). Then run
#
#   hermes-pipe swe --tasks DIR/tasks.jsonl --sandbox local --cwd-root DIR ...
#
# A checkout already at its base commit is kept; one that is not is refused
# (remove it). Needs: bash, git, python3 (to rewrite the JSON lines).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
suite=$here/datasets/swe-mini
log() { printf 'swe-repos.sh: %s\n' "$*" >&2; }

if [ $# -ne 1 ] || [ -z "$1" ]; then
	echo "usage: $0 DIR" >&2
	exit 2
fi
for p in git python3; do
	command -v "$p" >/dev/null || { log "$p is not installed"; exit 1; }
done
mkdir -p "$1/repos"
dir=$(cd "$1" && pwd -P)

# base_of prints the base commit tasks.jsonl records for the image $1.
base_of() {
	grep -F "\"image\": \"$1\"" "$suite/tasks.jsonl" | sed -n 's/.*"base_commit": "\([0-9a-f]*\)".*/\1/p' | head -n1
}

# checkout commits repos/$1 into $dir/repos/$1 as swe-images.sh commits it
# into its image, and checks the head against $2 when tasks.jsonl has one.
checkout() {
	local name=$1 want=$2 dst=$dir/repos/$1 head
	if [ -e "$dst" ]; then
		head=$(git -C "$dst" rev-parse -q --verify HEAD 2>/dev/null || true)
		if [ -e "$dst/.git" ] && [ -n "$head" ] && { [ -z "$want" ] || [ "$head" = "$want" ]; } && [ -z "$(git -C "$dst" status --porcelain)" ]; then
			return 0
		fi
		log "$dst exists and is not the clean checkout of $name at ${want:-its base commit}: remove it"
		return 1
	fi
	mkdir -p "$dst.tmp.$$"
	cp -R "$suite/repos/$name/." "$dst.tmp.$$/"
	head=$(cd "$dst.tmp.$$" && sh -e "$here/scripts/swe-base-commit.sh")
	if [ -n "$want" ] && [ "$head" != "$want" ]; then
		rm -rf "$dst.tmp.$$"
		log "$name: base commit $head differs from tasks.jsonl ($want): update the task"
		return 1
	fi
	mv "$dst.tmp.$$" "$dst"
}

# The task repositories: "<folder> <image>" per line of images.txt.
mapfile -t lines < <(grep -v '^[[:space:]]*\(#\|$\)' "$suite/images.txt")
for l in "${lines[@]}"; do
	set -- $l
	checkout "$1" "$(base_of "$2")"
done

# The tasks, each with cwd = its checkout; written beside and renamed, so a
# reader never sees half a file.
python3 - "$suite" "$dir" >"$dir/tasks.jsonl.tmp" <<'EOF'
import json, sys

suite, dest = sys.argv[1], sys.argv[2]
folder = {}
with open(suite + "/images.txt") as f:
    for line in f:
        parts = line.split()
        if parts and not parts[0].startswith("#"):
            folder[parts[1]] = parts[0]
with open(suite + "/tasks.jsonl") as f:
    for n, line in enumerate(f, 1):
        if not line.strip():
            continue
        task = json.loads(line)
        name = folder.get(task.get("image", ""))
        if name is None:
            sys.exit("tasks.jsonl line %d: image %r is not in images.txt" % (n, task.get("image")))
        task["cwd"] = dest + "/repos/" + name
        print(json.dumps(task, ensure_ascii=False))
EOF
mv "$dir/tasks.jsonl.tmp" "$dir/tasks.jsonl"
log "wrote $dir/tasks.jsonl and ${#lines[@]} checkouts under $dir/repos"
echo "$dir"
