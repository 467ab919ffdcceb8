#!/usr/bin/env bash
# Benchmark of `hermes-pipe view` on a finished R-row generate folder (default
# 1,000,000 rows, built by scripts/mkrun as the resume benchmark does).
#   first open:  view reads every record once and keeps its index in a cache
#                folder: seconds from start to the first page served.
#   later opens: from the cached index: seconds from start to the first page,
#                then a filter by outcome, a filter by tool, a sort by tokens;
#                peak RSS of the view process after them.
# Usage: scripts/bench-view.sh   (R=1000000 by default)
#   OUT=DIR scripts/bench-view.sh   builds the folder in DIR once (it takes
#   minutes at 1M rows) and reuses it on later runs; the index cache is
#   always a fresh one under the work folder.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s build
FAKELLM=bin/fakellm
. scripts/lib-bench.sh
R=${R:-1000000}
out=${OUT:-$work/out}
if [ ! -s "$out/run.json" ]; then
  awk -v n="$R" 'BEGIN { for (i = 0; i < n; i++) printf "{\"prompt\": \"bench answer %d\"}\n", i }' >"$work/prompts.jsonl"
  go run ./scripts/mkrun --prompts "$work/prompts.jsonl" --out "$out" >/dev/null
fi

now() { date +%s.%N; }
get() { curl -sf -o /dev/null -w '%{time_total}' "http://$addr$1"; }

open_view() { # $1 = label; starts view, waits for the first page, prints the time
  # A free port picked beforehand, not --addr-file: that file is written
  # with fsyncs, whose time on a busy disk is not the viewer's.
  local port; port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  addr=127.0.0.1:$port
  local t0; t0=$(now)
  bin/hermes-pipe view --addr "$addr" --cache-dir "$work/cache" "$out" >/dev/null 2>"$work/view.err" &
  view_pid=$!
  pids+=("$view_pid")
  until curl -sf -o /dev/null "http://$addr/api/meta"; do kill -0 "$view_pid" 2>/dev/null || { cat "$work/view.err"; exit 1; }; sleep 0.01; done
  curl -sf -o /dev/null "http://$addr/api/records?page=0"
  printf '%s: %d rows, first page served %.2fs after start (%s); CPU %d ms\n' "$1" "$R" "$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')" "$(head -1 "$work/view.err")" "$(cpu_ms "$view_pid")"
}
stop_view() { kill "$view_pid"; wait "$view_pid" 2>/dev/null || true; }

open_view "first open (index built)"
printf '  peak RSS while building: %d MB\n' $(( $(awk '/VmHWM/ { print $2 }' "/proc/$view_pid/status") / 1024 ))
stop_view
open_view "later open (cached index)"
printf '  filter outcome=completed: %ss; filter tool=terminal (no match): %ss; sort by -tokens: %ss; page 500: %ss\n' \
  "$(get '/api/records?outcome=completed')" "$(get '/api/records?tool=terminal')" "$(get '/api/records?sort=-tokens')" "$(get '/api/records?page=500')"
printf '  search "answer 999999" (the last record): %ss; search "Bench Answer 12345" (mixed case, 11 matches): %ss\n' \
  "$(get '/api/records?q=answer%20999999&size=1')" "$(get '/api/records?q=Bench%20Answer%2012345')"
printf '  peak RSS: %d MB; index file %d MB; CPU %d ms in all\n' $(( $(awk '/VmHWM/ { print $2 }' "/proc/$view_pid/status") / 1024 )) $(( $(du -sk "$work/cache" | cut -f1) / 1024 )) "$(cpu_ms "$view_pid")"
stop_view
