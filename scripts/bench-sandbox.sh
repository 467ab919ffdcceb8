#!/usr/bin/env bash
# Per-command cost of a sandbox driver: the median wall time per command that
# the package's benchmark reports, and the CPU per command of the whole
# process tree (the test binary, its shells, bwrap, ...), measured as the
# difference between a long and a short run of the same benchmark so that
# start-up and session set-up cancel out. The tree's CPU is read from a
# cgroup v1 cpuacct group where this machine has one we may create (a
# confined session's shells are killed with their sandbox, never waited
# for, so GNU time, the fallback, misses their CPU); the line says which.
#
# Usage: scripts/bench-sandbox.sh PACKAGE BENCH-REGEX [N]
# BENCH-REGEX must match exactly one benchmark; anchor each level (go test
# splits the pattern at "/"):
#   scripts/bench-sandbox.sh ./sandbox/local/ '^BenchmarkExec$/^confined/persistent$'
#   scripts/bench-sandbox.sh ./sandbox/docker/ '^BenchmarkExec' 300
# Run it from any checkout (an older one too): it builds that checkout's
# test binary. docker and ssh need their services (scripts/dockerd.sh,
# scripts/sshd.sh).
set -euo pipefail
pkg=${1:?package}
re=${2:?benchmark regex}
n=${3:-2000}
short=$((n / 10))
[ "$short" -ge 1 ] || short=1
bin=$(mktemp)
trap 'rm -f "$bin"' EXIT
go test -c -o "$bin" "$pkg"
dir=$(cd "$pkg" && pwd)
acct=/sys/fs/cgroup/cpuacct
how="GNU time of the test binary and the processes it waited for"
if [ -w "$acct/cgroup.procs" ] && mkdir "$acct/hermes-bench-$$" 2>/dev/null; then
  rmdir "$acct/hermes-bench-$$"
  how="cpuacct of the whole tree"
fi
run() { # $1 = iterations; prints "cpu_seconds<TAB>benchmark output"
  local out t g
  t=$(mktemp)
  if [ "$how" = "cpuacct of the whole tree" ]; then
    g=$acct/hermes-bench-$$-$1
    mkdir "$g"
    out=$(cd "$dir" && sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$g" \
      "$bin" -test.run '^$' -test.bench "$re" -test.benchtime "${1}x" 2>&1 | grep -E '^Benchmark' || true)
    awk '{ print $1 / 1e9, 0 }' "$g/cpuacct.usage" >"$t"
    # A killed sandbox leaves the group a moment after its processes died.
    for _ in $(seq 100); do rmdir "$g" 2>/dev/null && break; sleep 0.05; done
  else
    out=$(cd "$dir" && /usr/bin/time -f "%U %S" -o "$t" "$bin" -test.run '^$' -test.bench "$re" -test.benchtime "${1}x" 2>&1 | grep -E '^Benchmark' || true)
  fi
  printf '%s\t%s\n' "$(awk '{ print $1 + $2 }' "$t")" "$out"
  rm -f "$t"
}
IFS=$'\t' read -r cpu_short _ < <(run "$short")
IFS=$'\t' read -r cpu_long out < <(run "$n")
echo "$out"
awk -v a="$cpu_long" -v b="$cpu_short" -v n="$n" -v s="$short" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
  -v how="$how" 'BEGIN { printf "cpu per command: %.3f ms (%d vs %d iterations, %s; load %s)\n", (a - b) * 1000 / (n - s), n, s, how, l }'
