#!/usr/bin/env bash
# Peak memory of `hermes-pipe compress` on very long rows, against a
# separate fakellm process: ROWS rows of ROW_MB MB each (tool turns of
# about 256 KB with escaped newlines), every one over the token target, so
# each is parsed, counted, summarised and written. Prints the peak RSS and
# its multiple of one row, which the README documents (see compress,
# "Memory").
# Usage: scripts/bench-compress-bigrow.sh            (ROWS=1 and ROWS=4)
# Env:   ROW_MB (default 50), ROWS (default "1 4"), WORKERS (default 8),
#        EXTRA (more compress flags, e.g. "--max-bytes-in-flight 16777216").
set -euo pipefail
cd "$(dirname "$0")/.."
ROW_MB=${ROW_MB:-50}
ROWS=${ROWS:-"1 4"}
WORKERS=${WORKERS:-8}
. scripts/lib-bench.sh

build_bins

# gen COUNT FILE: COUNT rows of about ROW_MB MB each.
gen() {
  awk -v n="$1" -v mb="$ROW_MB" 'BEGIN {
    srand(11)
    line = ""
    for (w = 0; w < 20; w++) line = line sprintf("%s%d", (w ? " " : ""), int(rand() * 5000))
    line = line "\\n"
    per = 256 * 1024; reps = int(per / length(line)); turns = int(mb * 1024 * 1024 / per)
    body = ""
    for (r = 0; r < reps; r++) body = body line
    for (i = 0; i < n; i++) {
      printf "{\"id\": \"big%d\", \"conversations\": [{\"from\": \"system\", \"value\": \"You are a function calling AI model.\"}, {\"from\": \"human\", \"value\": \"task %d\"}", i, i
      for (s = 0; s < turns; s++) {
        printf ", {\"from\": \"gpt\", \"value\": \"<tool_call>\\n{\\\"name\\\": \\\"terminal\\\", \\\"arguments\\\": {\\\"command\\\": \\\"step %d\\\"}}\\n</tool_call>\"}", s
        printf ", {\"from\": \"tool\", \"value\": \"<tool_response>\\n%d %s</tool_response>\"}", s, body
      }
      printf ", {\"from\": \"gpt\", \"value\": \"done\"}]}\n"
    }
  }' >"$2"
}

start_fake 1ms
for rows in $ROWS; do
  gen "$rows" "$work/in.jsonl"
  size=$(stat -c %s "$work/in.jsonl")
  row_kb=$((size / rows / 1024))
  rm -rf "$work/out"
  # shellcheck disable=SC2086
  read -r wall _ _ rss < <(timed "$hp" compress --in "$work/in.jsonl" --out "$work/out" --base-url "$url" --model bench \
    --target-tokens 15250 --summary-tokens 750 --workers "$WORKERS" --progress none --max-retries 0 ${EXTRA:-})
  ratio=$(awk -v r="$rss" -v k="$row_kb" 'BEGIN { printf "%.1f", r / k }')
  printf 'bigrow: %d row(s) of %d MB, --workers %d: peak RSS %d MB (%s x one row), %ss\n' \
    "$rows" $((row_kb / 1024)) "$WORKERS" $((rss / 1024)) "$ratio" "$wall"
done
