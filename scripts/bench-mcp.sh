#!/usr/bin/env bash
# Costs of the MCP client (stages/rollout/mcp), for a rollout-scoped stdio
# server of each kind: the in-process SDK's test server (the package's test
# binary serving over stdio) and a real npm server (@modelcontextprotocol/
# server-memory run by node); a call over Streamable HTTP to the test server
# is shown beside them.
#   per call     one tools/call on a running server (BenchmarkMCPCall)
#   per rollout  start + initialise + one call + stop (BenchmarkMCPRollout);
#                the start cost is this less a call
# Then ROLLOUTS rollouts (default 1000) of each stdio server, six calls each,
# checking that no process and no file descriptor is left
# (TestManyRolloutsLeakNothing, which logs start, call and stop costs).
#
# Usage: scripts/bench-mcp.sh            (ROLLOUTS=1000 BENCHTIME=3s by default)
# Needs node and `npm ci --prefix scripts` (the servers are pinned in
# scripts/package.json).
set -euo pipefail
cd "$(dirname "$0")/.."
ROLLOUTS=${ROLLOUTS:-1000}
BENCHTIME=${BENCHTIME:-3s}
[ -f scripts/node_modules/@modelcontextprotocol/server-memory/dist/index.js ] ||
  { echo "run: npm ci --prefix scripts" >&2; exit 2; }
bin=$(mktemp)
trap 'rm -f "$bin"' EXIT
go test -c -o "$bin" ./stages/rollout/mcp/
cd stages/rollout/mcp
echo "== benchmarks (-benchtime $BENCHTIME)"
out=$("$bin" -test.run '^$' -test.bench '^BenchmarkMCP(Call|Rollout)$' -test.benchtime "$BENCHTIME" | grep -E '^Benchmark')
echo "$out"
echo "$out" | awk '
  /^BenchmarkMCPCall\//    { split($1, a, "/"); sub(/-[0-9]+$/, "", a[2]); call[a[2]] = $3 }
  /^BenchmarkMCPRollout\// { split($1, a, "/"); sub(/-[0-9]+$/, "", a[2]); roll[a[2]] = $3 }
  END {
    printf "%-12s %14s %14s %14s\n", "server", "per call", "per rollout", "start (= rollout - call)"
    for (s in call) {
      if (s in roll) printf "%-12s %11.2f ms %11.2f ms %11.2f ms\n", s, call[s] / 1e6, roll[s] / 1e6, (roll[s] - call[s]) / 1e6
      else printf "%-12s %11.2f ms %14s %14s\n", s, call[s] / 1e6, "-", "-"
    }
  }'
for server in gosdk npm-memory; do
  echo "== $ROLLOUTS rollouts of $server, no leaked process or file descriptor"
  MCPTEST_LEAK_SERVER=$server MCPTEST_ROLLOUTS=$ROLLOUTS "$bin" -test.run "^TestManyRolloutsLeakNothing\$/^$server\$" -test.v -test.timeout 4h |
    grep --line-buffered -E 'rollouts:|^(---|ok|FAIL|PASS)|left|descriptors'
done
