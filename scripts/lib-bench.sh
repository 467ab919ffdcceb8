# Shared by the benchmark scripts (source it after setting FAKELLM, the
# fakellm binary, and FAKE_ARGS, extra fakellm flags). It makes a work
# folder, tracks started processes by PID and stops them on exit.
#   start_fake LATENCY   start fakellm in this shell; sets url and fake_pid
#   stop_fake            stop it by its PID
#   timed CMD...         run CMD under GNU time; prints "wall_s user_s sys_s maxrss_kb";
#                        $work/ended is when it ended ($EPOCHREALTIME, seconds)
#   cpu_ms PID           user+system CPU time of a process so far, in ms
#   build_bins           build fakellm and hermes-pipe into the work folder; sets hp and FAKELLM
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]+"${pids[@]}"}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

start_fake() {
  rm -f "$work/addr"
  # shellcheck disable=SC2086
  "$FAKELLM" --addr 127.0.0.1:0 --addr-file "$work/addr" ${FAKE_ARGS:-} --latency "$1" >"$work/fake.log" 2>&1 &
  fake_pid=$!
  pids+=("$fake_pid")
  for _ in $(seq 200); do [ -s "$work/addr" ] && break; sleep 0.05; done
  url="http://$(cat "$work/addr")/v1"
}
stop_fake() { kill "$fake_pid" 2>/dev/null || true; wait "$fake_pid" 2>/dev/null || true; }

timed() {
  /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$@" >/dev/null 2>"$work/err" || { cat "$work/err"; return 1; }
  printf %s "${EPOCHREALTIME/,/.}" >"$work/ended" # when GNU time saw the command end, before any fork of ours
  cat "$work/time"
}

cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ print int(($14 + $15) * 1000 / hz) }' "/proc/$1/stat"; }
build_bins() {
  make -s build BIN="$work/bin" # the Makefile's build, tags included
  hp="$work/bin/hermes-pipe"
  FAKELLM="$work/bin/fakellm"
}
