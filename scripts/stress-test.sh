#!/usr/bin/env bash
# Runs the test suite while busy-loop processes load every CPU, to show the
# tests hold on a loaded machine (they wait on conditions, never on time).
#
#   scripts/stress-test.sh [-n N] [PACKAGE...]
#
# N busy loops (default 4, or $STRESS_LOOPS) spin while `make test` runs over
# the packages given (default ./..., passed as PKGS). The loops are killed by
# PID when the script exits, however it exits; the exit status is make's.
set -euo pipefail
cd "$(dirname "$0")/.."

loops="${STRESS_LOOPS:-4}"
while getopts "n:h" opt; do
  case "$opt" in
    n) loops="$OPTARG" ;;
    h) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: $0 [-n N] [PACKAGE...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if ! [[ "$loops" =~ ^[0-9]+$ ]]; then
  echo "stress-test: -n wants a whole number of busy loops, got '$loops'" >&2
  exit 2
fi
pkgs="${*:-./...}"

pids=()
stop_loops() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  pids=()
}
trap stop_loops EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for _ in $(seq 1 "$loops"); do
  ( while :; do :; done ) &
  pids+=("$!")
done
echo "stress-test: $loops busy loops (pids ${pids[*]:-none}); make test PKGS='$pkgs'" >&2

start=$(date +%s)
status=0
make test PKGS="$pkgs" || status=$?
echo "stress-test: make test exited $status after $(( $(date +%s) - start )) s with $loops busy loops" >&2
exit "$status"
