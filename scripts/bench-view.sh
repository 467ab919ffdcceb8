#!/usr/bin/env bash
# Benchmark of `hermes-pipe view` on a finished R-row generate folder (default
# 1,000,000 rows, built by scripts/mkrun as the resume benchmark does).
#   cold open:   an empty index cache: view answers at once from the folder
#                while it builds the index in the background. Seconds from
#                start to the first page, to a page filtered by outcome (and
#                to one whose filter matches nothing: it reads for its budget
#                and answers a lower bound), whether those were answered
#                during the build, seconds until the index is ready, and the
#                peak RSS of the view process over the whole run.
#   warm open:   from the cached index: seconds from start to the first page,
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

secs() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
rss_mb() { echo $(( $(awk '/VmHWM/ { print $2 }' "/proc/$view_pid/status") / 1024 )); }
# timed URL: the answer's seconds, then "during the build" when that same
# answer carried the build's progress ("from the index" otherwise).
timed() {
  local t; t=$(curl -sf -o "$work/answer" -w '%{time_total}' "http://$addr$1")
  if grep -q '"indexing":{' "$work/answer"; then echo "$t during the build"; else echo "$t from the index"; fi
}

start_view() {
  # A free port picked beforehand, not --addr-file: that file is written
  # with fsyncs, whose time on a busy disk is not the viewer's.
  local port; port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  addr=127.0.0.1:$port
  t0=$(now)
  bin/hermes-pipe view --addr "$addr" --cache-dir "$work/cache" "$out" >/dev/null 2>"$work/view.err" &
  view_pid=$!
  pids+=("$view_pid")
  until curl -sf -o /dev/null "http://$addr/api/meta"; do kill -0 "$view_pid" 2>/dev/null || { cat "$work/view.err"; exit 1; }; sleep 0.01; done
}
stop_view() { kill "$view_pid"; wait "$view_pid" 2>/dev/null || true; }

rm -rf "$work/cache"
start_view
curl -sf -o /dev/null "http://$addr/api/records?page=0"
first=$(secs "$t0")
read -r filt filt_how < <(timed '/api/records?outcome=completed'); filt_at=$(secs "$t0")
read -r none none_how < <(timed '/api/records?outcome=no_such_outcome')
sort_code=$(curl -s -o /dev/null -w '%{http_code}' "http://$addr/api/records?sort=-tokens")
until curl -sf "http://$addr/api/meta" | grep -qv '"indexing":{'; do kill -0 "$view_pid" 2>/dev/null || { cat "$work/view.err"; exit 1; }; sleep 0.1; done
ready=$(secs "$t0")
printf 'cold open (empty cache): %d rows; first page served %ss after start; filter outcome=completed %ss (answered %s, %ss after start)\n' "$R" "$first" "$filt" "$filt_how" "$filt_at"
printf '  filter matching nothing: %ss (%s; a lower bound); sort by -tokens meanwhile: HTTP %s; index ready %ss after start\n' "$none" "$none_how" "$sort_code" "$ready"
curl -sf -o /dev/null "http://$addr/api/records?sort=-tokens"
printf '  after it: filter outcome=completed %ss; sort by -tokens %ss\n' "$(get '/api/records?outcome=completed')" "$(get '/api/records?sort=-tokens')"
printf '  peak RSS of view over the whole cold run: %d MB; CPU %d ms; %s\n' "$(rss_mb)" "$(cpu_ms "$view_pid")" "$(grep 'index ready' "$work/view.err")"
stop_view

start_view
curl -sf -o /dev/null "http://$addr/api/records?page=0"
printf 'warm open (cached index): %d rows, first page served %ss after start (%s); CPU %d ms\n' "$R" "$(secs "$t0")" "$(head -1 "$work/view.err")" "$(cpu_ms "$view_pid")"
printf '  filter outcome=completed: %ss; filter tool=terminal (no match): %ss; sort by -tokens: %ss; page 500: %ss\n' \
  "$(get '/api/records?outcome=completed')" "$(get '/api/records?tool=terminal')" "$(get '/api/records?sort=-tokens')" "$(get '/api/records?page=500')"
printf '  search "answer 999999" (the last record): %ss; search "Bench Answer 12345" (mixed case, 11 matches): %ss\n' \
  "$(get '/api/records?q=answer%20999999&size=1')" "$(get '/api/records?q=Bench%20Answer%2012345')"
printf '  peak RSS: %d MB; index file %d MB; CPU %d ms in all\n' "$(rss_mb)" $(( $(du -sk "$work/cache" | cut -f1) / 1024 )) "$(cpu_ms "$view_pid")"
stop_view
