#!/usr/bin/env bash
# Benchmark of `hermes-pipe export` on a finished R-row generate folder
# (default 1,000,000 rows: R/SAMPLES prompts × SAMPLES samples, agent
# rollouts in Hermes' form with a system turn, a reasoned tool call, its
# result and a reasoned answer, a tenth of them max_turns; built by
# `scripts/mkrun --agent`, as the resume benchmark builds its folder).
#   parquet:  export SRC --to DIR (messages rows, Parquet, the default)
#   jsonl:    the same with --file-format jsonl
#   best-of:  --best-of 1 --split train=0.98,validation=0.02 --seed 1
# Each case prints input rows per second (wall), rows written, the data's
# size, and the peak RSS of the export process, beside the targets
# (>= 50,000 rows/s to Parquet, peak RSS < 300 MB).
# Usage: scripts/bench-export.sh [parquet|jsonl|best-of|all]  (default all)
#   R=ROWS SAMPLES=N (default 1000000 and 2)
#   OUT=DIR builds the source folder in DIR/export-src-R-xN once (minutes
#   at 1M rows) and reuses it on later runs; without OUT it is built in the
#   work folder and removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
R=${R:-1000000}
SAMPLES=${SAMPLES:-2}
case $what in parquet|jsonl|best-of|all) ;; *) echo "usage: $0 [parquet|jsonl|best-of|all]"; exit 2 ;; esac
make -s build
FAKELLM=bin/fakellm
. scripts/lib-bench.sh

src=${OUT:-$work}/export-src-$R-x$SAMPLES
if [ ! -s "$src/run.json" ]; then
  [ $((R % SAMPLES)) -eq 0 ] || { echo "R=$R is not a multiple of SAMPLES=$SAMPLES"; exit 2; }
  rm -rf "$src"
  mkdir -p "$(dirname "$src")"
  awk -v n=$((R / SAMPLES)) 'BEGIN { for (i = 0; i < n; i++) printf "{\"prompt\": \"How many lines of notes-%d.txt mention the answer?\"}\n", i }' >"$work/prompts.jsonl"
  go run ./scripts/mkrun --agent --samples "$SAMPLES" --prompts "$work/prompts.jsonl" --out "$src" >/dev/null
fi
printf 'source: %s, %d rows (%d prompts x %d samples), %d MB of shards\n' "$src" "$R" $((R / SAMPLES)) "$SAMPLES" $(( $(du -sk "$src/data" | cut -f1) / 1024 ))

# rows_written DIR: the rows of an export's data files (Parquet counted with
# DuckDB when scripts/node_modules has it, else "n/a").
rows_written() {
  local files=("$1"/data/*)
  case ${files[0]} in
    *.jsonl) cat "${files[@]}" | wc -l ;;
    *.parquet)
      if [ -d scripts/node_modules/@duckdb/node-api ]; then
        (cd scripts && node --input-type=module -e '
          import { DuckDBInstance } from "@duckdb/node-api";
          const con = await (await DuckDBInstance.create(":memory:")).connect();
          const q = "\x27", p = process.argv[1] + "/data/*.parquet";
          const r = await con.runAndReadAll(`SELECT count(*) AS n FROM read_parquet(${q}${p.replaceAll(q, q + q)}${q})`);
          console.log(String(r.getRowObjectsJS()[0].n));' "$1")
      else echo n/a; fi ;;
    *) echo 0 ;;
  esac
}

# bench NAME ARGS...: one timed export of the source folder into a fresh
# folder, then its figures.
bench() {
  local name=$1; shift
  local dir=$work/export-$name
  rm -rf "$dir"
  local figures files written
  figures=$(timed bin/hermes-pipe export "$src" --to "$dir" "$@") || { printf '%s: export %s failed:\n%s\n' "$name" "$*" "$figures"; exit 1; }
  read -r wall user sys rss <<<"$figures"
  files=$(find "$dir/data" -type f | wc -l)
  written=$(rows_written "$dir")
  awk -v n="$name" -v r="$R" -v w="$wall" -v u="$user" -v s="$sys" -v m="$rss" -v out="$written" -v f="$files" \
      -v mb=$(( $(du -sk "$dir/data" | cut -f1) / 1024 )) -v args="$*" 'BEGIN {
    printf "%s: export %s: %d rows in %.2fs = %.0f rows/s (target >= 50000 to Parquet); cpu %.1fs; peak RSS %d MB (target < 300 MB)\n", n, (args == "" ? "(defaults)" : args), r, w, r / (w > 0 ? w : 0.001), u + s, m / 1024
    printf "  wrote %s rows in %d files, %d MB\n", out, f, mb
  }'
  rm -rf "$dir"
}

case $what in
  parquet) bench parquet ;;
  jsonl) bench jsonl --file-format jsonl ;;
  best-of) bench best-of --best-of 1 --split train=0.98,validation=0.02 --seed 1 ;;
  all)
    bench parquet
    bench jsonl --file-format jsonl
    bench best-of --best-of 1 --split train=0.98,validation=0.02 --seed 1
    ;;
esac
