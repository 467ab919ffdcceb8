#!/usr/bin/env bash
# Demo: start fakellm on loopback, run generate on the built-in demo prompts,
# print the statistics and the first trajectory, and stop fakellm (by PID).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
OUT=${OUT:-demo-out}
[ -x "$BIN/hermes-pipe" ] && [ -x "$BIN/fakellm" ] || make build
work=$(mktemp -d)
"$BIN/fakellm" --addr 127.0.0.1:0 --addr-file "$work/addr" \
  --scripts datasets/demo/fakellm-scripts.json --latency 50ms --jitter 50ms >"$work/fakellm.log" 2>&1 &
fake_pid=$!
cleanup() { kill "$fake_pid" 2>/dev/null || true; wait "$fake_pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 100); do [ -s "$work/addr" ] && break; sleep 0.05; done
[ -s "$work/addr" ] || { echo "fakellm did not start:"; cat "$work/fakellm.log"; exit 1; }
addr=$(cat "$work/addr")
echo "== fakellm listening on http://$addr (pid $fake_pid)"
isolation=()
if ! "$BIN/hermes-pipe" sandbox check >/dev/null 2>&1; then
  # The demo's commands are the fake model's own harmless ones; a real run
  # refuses instead (install the Debian package bubblewrap to confine them).
  echo "== this machine cannot confine local commands (hermes-pipe sandbox check); the demo runs them with --local-isolation none"
  isolation=(--local-isolation none)
fi
echo "== hermes-pipe generate --prompts datasets/demo/prompts.jsonl --out $OUT --overwrite ${isolation[*]}"
"$BIN/hermes-pipe" generate --prompts datasets/demo/prompts.jsonl --out "$OUT" --overwrite "${isolation[@]}" \
  --base-url "http://$addr/v1" --model demo-model --workers 4 --progress plain
echo "== hermes-pipe verify $OUT"
"$BIN/hermes-pipe" verify "$OUT"
echo "== hermes-pipe stats $OUT"
"$BIN/hermes-pipe" stats "$OUT"
echo "== first trajectory (hermes-pipe cat $OUT | head -1)"
# The rest is read to the end, so cat never dies of SIGPIPE (which pipefail
# would turn into the demo's exit status).
"$BIN/hermes-pipe" cat "$OUT" | { head -1 | cut -c1-1500; cat >/dev/null; }
echo
echo "== hermes-pipe export $OUT --to $OUT-sft --overwrite --where outcome=completed --file-format jsonl"
"$BIN/hermes-pipe" export "$OUT" --to "$OUT-sft" --overwrite --where outcome=completed --file-format jsonl --progress none
echo "== done: records are in $OUT/data, run 'bin/hermes-pipe cat $OUT' to see them all;"
echo "   the completed ones as a training set (messages + tools) in $OUT-sft (README.md, data/, export.json)"
