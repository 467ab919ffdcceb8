#!/usr/bin/env bash
# Benchmarks of `hermes-pipe generate` against a separate fakellm process.
#   scheduling: N rollouts × 3 LLM calls at LATENCY_MS (100), --workers
#               WORKERS (200); wall vs the ideal 3 × LATENCY_MS × ⌈N /
#               WORKERS⌉ (the issue's own figure was taken at N=600,
#               LATENCY_MS=250). Three variants: "floor", the same
#               calls from a bare net/http client (scripts/barecalls), the
#               ratio the endpoint itself sets on this machine (its latency
#               as timers and wake-ups deliver it: a Go server's 100 ms is
#               ~102 ms here); tool calls answered without the sandbox
#               (runtime + client only); and real `terminal` commands in the
#               local sandbox.
#   cpu/call:   user+sys CPU of hermes-pipe divided by its LLM calls; "tree"
#               adds what GNU time cannot see, the sandboxes' shells (killed
#               with their sandbox, never waited for), read from a cgroup v1
#               cpuacct group where this machine has one we may create.
#   memory:     1,000 rollouts in flight at 2 s per call; peak RSS.
#   resume:     a finished 1,000,000-row run; `generate --resume` until
#               "nothing to do".
# Usage: scripts/bench-generate.sh [scheduling|memory|resume|all]  (default all)
# Env: N (rollouts, default 2000), LATENCY_MS and WORKERS (scheduling; 100, 200), VARIANTS (scheduling variants, default
# "floor runtime terminal"), GEN_ARGS (extra generate flags, e.g. prices and caps),
# CPUPROFILE=PREFIX (hermes-pipe's CPU profile of each scheduling variant to
# PREFIX.runtime and PREFIX.terminal).
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
N=${N:-2000}
LATENCY_MS=${LATENCY_MS:-100}
WORKERS=${WORKERS:-200}
make -s build
FAKELLM=bin/fakellm
FAKE_ARGS="--scripts datasets/bench/fakellm-scripts.json"
. scripts/lib-bench.sh

prompts() { # $1 = count, $2 = prompt prefix
  awk -v n="$1" -v p="$2" 'BEGIN { for (i = 0; i < n; i++) printf "{\"prompt\": \"%s %d\"}\n", p, i }' >"$work/prompts.jsonl"
}

acct=/sys/fs/cgroup/cpuacct

scheduling() {
  start_fake "${LATENCY_MS}ms"
  ideal=$(awk -v n="$N" -v w="$WORKERS" -v l="$LATENCY_MS" 'BEGIN { printf "%.3f", 3 * l / 1000 * int((n + w - 1) / w) }')
  for variant in ${VARIANTS:-floor runtime terminal}; do
    if [ "$variant" = floor ]; then
      go build -o "$work/barecalls" ./scripts/barecalls
      read -r _ wall < <("$work/barecalls" --url "$url" --n "$N" --workers "$WORKERS" --calls 3)
      printf 'scheduling[floor]: %d rollouts x 3 calls at %d ms from a bare client, workers %d: wall %.3fs, ideal %ss, ratio %.3f; load %s\n' \
        "$N" "$LATENCY_MS" "$WORKERS" "$wall" "$ideal" "$(awk -v w="$wall" -v i="$ideal" 'BEGIN { print w / i }')" "$(cut -d' ' -f1 /proc/loadavg)"
      continue
    fi
    prompts "$N" "bench $variant"
    rm -rf "$work/out"
    fake_before=$(cpu_ms "$fake_pid")
    acct_group=
    if [ -w "$acct/cgroup.procs" ]; then
      # The command first moves itself into a new group, made here: making
      # a cgroup, and the first move into it, take up to ~20 ms on this
      # machine, which is not the command's time.
      acct_group=$acct/hermes-bench-$$-$variant
      mkdir "$acct_group"
    fi
    # The clock starts when the command is about to exec, after that move,
    # and stops when GNU time has seen it end (bash's $EPOCHREALTIME,
    # microseconds, both; timed writes the end): GNU time's own wall clock
    # has 10 ms steps, a third of a percent here.
    wrap=(bash -c 'if [ -n "$1" ]; then echo $$ >"$1/cgroup.procs" || exit 1; fi
      printf %s "${EPOCHREALTIME/,/.}" >"$2" && shift 2 && exec "$@"' bash "$acct_group" "$work/t0")
    read -r _ user sys rss < <(timed "${wrap[@]}" bin/hermes-pipe ${CPUPROFILE:+--cpuprofile "$CPUPROFILE.$variant"} generate \
      --prompts "$work/prompts.jsonl" --out "$work/out" \
      --base-url "$url" --model bench --workers "$WORKERS" --toolsets terminal --progress none --max-retries 0 ${GEN_ARGS:-})
    wall=$(awk -v a="$(<"$work/t0")" -v b="$(<"$work/ended")" 'BEGIN { printf "%.3f", b - a }')
    fake_cpu=$(( $(cpu_ms "$fake_pid") - fake_before ))
    calls=$((N * 3))
    tree=
    if [ -n "$acct_group" ]; then
      tree=$(awk -v c="$calls" '{ printf " (tree %.3f ms)", $1 / 1e6 / c }' "$acct_group/cpuacct.usage")
      for _ in $(seq 100); do rmdir "$acct_group" 2>/dev/null && break; sleep 0.05; done
    fi
    printf 'scheduling[%s]: %d rollouts x 3 calls at %d ms, workers %d: wall %.3fs, ideal %ss, ratio %.3f; cpu/call %.3f ms%s (fakellm %.3f ms); rss %d MB; load %s\n' \
      "$variant" "$N" "$LATENCY_MS" "$WORKERS" "$wall" "$ideal" "$(awk -v w="$wall" -v i="$ideal" 'BEGIN { print w / i }')" \
      "$(awk -v u="$user" -v s="$sys" -v c="$calls" 'BEGIN { print (u + s) * 1000 / c }')" "$tree" \
      "$(awk -v f="$fake_cpu" -v c="$calls" 'BEGIN { print f / c }')" $((rss / 1024)) "$(cut -d' ' -f1 /proc/loadavg)"
    bin/hermes-pipe verify "$work/out" >/dev/null
  done
  stop_fake
}

memory() {
  start_fake 2s
  prompts 1000 "bench answer"
  rm -rf "$work/out"
  read -r wall user sys rss < <(timed bin/hermes-pipe generate --prompts "$work/prompts.jsonl" --out "$work/out" \
    --base-url "$url" --model bench --workers 1000 --toolsets terminal --progress none --max-retries 0)
  printf 'memory: 1000 rollouts in flight at 2s per call: wall %.2fs, peak RSS %d MB\n' "$wall" $((rss / 1024))
  stop_fake
}

resume() {
  R=${R:-1000000}
  prompts "$R" "bench answer"
  rm -rf "$work/out"
  go run ./scripts/mkrun --prompts "$work/prompts.jsonl" --out "$work/out"
  sync # the folder's writeback would otherwise run during the timed resume
  start_fake 0s
  for try in 1 2 3; do # three times: the first also pays for cold caches
    read -r wall user sys rss < <(timed bin/hermes-pipe generate --prompts "$work/prompts.jsonl" --out "$work/out" \
      --base-url "$url" --model bench --resume --progress none)
    grep -q "nothing to do" "$work/err" || { echo "resume did not report nothing to do:"; cat "$work/err"; return 1; }
    printf 'resume[%d]: %d finished rows, generate --resume says nothing to do in %.2fs wall, %.2fs CPU (user %.2f + sys %.2f, child processes included) (rss %d MB)\n' \
      "$try" "$R" "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" "$user" "$sys" $((rss / 1024))
  done
  stop_fake
}

case $what in
  scheduling) scheduling ;;
  memory) memory ;;
  resume) resume ;;
  all) scheduling; memory; resume ;;
  *) echo "usage: $0 [scheduling|memory|resume|all]"; exit 2 ;;
esac
