#!/usr/bin/env bash
# Benchmark of `hermes-pipe compress` against a separate fakellm process.
#   wall:   N trajectories (30 % over budget) summarised by fakellm at 300 ms,
#           --workers 64; wall vs the ideal ceil(over / 64) x 300 ms.
#   memory: peak RSS of that run, and of a run over an input 10x larger
#           (SCALE, default 10), which must stay flat.
# Usage: scripts/bench-compress.sh [wall|memory|all]   (default all)
# Env:   N (default 10000), SCALE (default 10), LATENCY (default 300ms),
#        BIG_LATENCY (latency of the large run, default LATENCY).
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
N=${N:-10000}
SCALE=${SCALE:-10}
LATENCY=${LATENCY:-300ms}
BIG_LATENCY=${BIG_LATENCY:-$LATENCY}
TARGET=2000
SUMMARY=200
. scripts/lib-bench.sh

build_bins

# gen COUNT FILE: COUNT Hermes-shaped trajectories; every row with
# i % 10 in {1, 4, 7} (30 %) is long enough to be over budget.
gen() {
  awk -v n="$1" 'BEGIN {
    srand(7)
    for (i = 0; i < n; i++) {
      over = (i % 10 == 1 || i % 10 == 4 || i % 10 == 7)
      steps = over ? 14 : 4; words = over ? 130 : 90
      printf "{\"id\": \"b%d\", \"conversations\": [{\"from\": \"system\", \"value\": \"You are a function calling AI model. <tools>[terminal]</tools>\"}, {\"from\": \"human\", \"value\": \"task %d\"}", i, i
      for (s = 0; s < steps; s++) {
        printf ", {\"from\": \"gpt\", \"value\": \"<tool_call>\\n{\\\"name\\\": \\\"terminal\\\", \\\"arguments\\\": {\\\"command\\\": \\\"step %d\\\"}}\\n</tool_call>\"}", s
        printf ", {\"from\": \"tool\", \"value\": \"<tool_response>\\n"
        for (w = 0; w < words; w++) printf "%s%d", (w ? " " : ""), int(rand() * 5000)
        printf "\\n</tool_response>\"}"
      }
      printf ", {\"from\": \"gpt\", \"value\": \"done\"}], \"metadata\": {\"batch\": %d}}\n", int(i / 100)
    }
  }' >"$2"
}

ARGS=(--target-tokens "$TARGET" --summary-tokens "$SUMMARY" --workers 64 --progress none --max-retries 0)

run_one() { # $1 = rows, $2 = label, $3 = latency
  gen "$1" "$work/in.jsonl"
  "$hp" compress --in "$work/in.jsonl" --dry-run "${ARGS[@]}" --json >"$work/dry.json"
  over=$(jq .over_target "$work/dry.json")
  calls=$(jq .projected_calls "$work/dry.json")
  start_fake "$3"
  rm -rf "$work/out"
  read -r wall user sys rss < <(timed "$hp" compress --in "$work/in.jsonl" --out "$work/out" --base-url "$url" --model bench "${ARGS[@]}")
  stop_fake
  ms=${3%ms}
  ideal=$(awk -v c="$calls" -v ms="$ms" 'BEGIN { w = int((c + 63) / 64); printf "%.2f", w * ms / 1000 }')
  m="$work/out/compression_metrics.json"
  printf '%s: %d rows (%d over budget, %d compressed, %d summary calls), workers 64, fakellm %s: wall %.2fs, ideal %ss, ratio %.3f; cpu %.1fs; peak RSS %d MB; input %d MB\n' \
    "$2" "$1" "$over" "$(jq .summary.trajectories_compressed "$m")" "$(jq .summarization.total_api_calls "$m")" "$3" \
    "$wall" "$ideal" "$(awk -v w="$wall" -v i="$ideal" 'BEGIN { print w / i }')" \
    "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" $((rss / 1024)) $(( $(stat -c %s "$work/in.jsonl") / 1048576 ))
  "$hp" verify "$work/out" | tail -1 || true
}

case "$what" in
wall | memory | all) ;;
*) echo "usage: $0 [wall|memory|all]" >&2; exit 2 ;;
esac
run_one "$N" "compress" "$LATENCY"
if [ "$what" != wall ]; then
  run_one $((N * SCALE)) "compress x$SCALE" "$BIG_LATENCY"
fi
