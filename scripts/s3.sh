#!/usr/bin/env bash
# Start or stop a real S3-compatible server on loopback for tests and demos.
#
#   scripts/s3.sh start DIR [BUCKET]   build (once) and start it; prints the endpoint
#   scripts/s3.sh stop DIR             stop the server started in DIR, by its PID
#
# The server is gofakes3 (github.com/johannesboyne/gofakes3, pinned below), a
# separate process speaking the S3 REST API over HTTP, storing objects in a bbolt
# database under DIR/data (its "fs" backend answers NoSuchBucket when a prefix
# has no object yet, so it is not used). It builds from the Go module proxy in about 10 s.
# HERMES_PIPE_S3_BIN, when set, is the folder the binary is built into and
# reused from (default DIR/bin). DIR/pid holds its PID, DIR/endpoint its URL, DIR/log its output.
# Use it with: --out "s3://BUCKET/run?endpoint=$(cat DIR/endpoint)&use_path_style=true&region=us-east-1&disable_https=true"
# and AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY set to any value.
set -euo pipefail

VERSION=v1.2.0
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR [BUCKET]" >&2; exit 2; }

case "$cmd" in
start)
	bucket=${3:-hermes}
	mkdir -p "$dir/data"
	dir=$(cd "$dir" && pwd)
	bin=${HERMES_PIPE_S3_BIN:-$dir/bin}
	mkdir -p "$bin"
	if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
		echo "s3.sh: already running (pid $(cat "$dir/pid")) at $(cat "$dir/endpoint")" >&2
		cat "$dir/endpoint"
		exit 0
	fi
	if [ ! -x "$bin/gofakes3" ]; then
		GOBIN="$bin" GOFLAGS=-mod=mod go install "github.com/johannesboyne/gofakes3/cmd/gofakes3@$VERSION"
	fi
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
	"$bin/gofakes3" -host "127.0.0.1:$port" -backend bolt -bolt.db "$dir/data/s3.db" \
		-initialbucket "$bucket" -quiet >"$dir/log" 2>&1 &
	echo $! >"$dir/pid"
	echo "http://127.0.0.1:$port" >"$dir/endpoint"
	for _ in $(seq 1 100); do
		if curl -fsS -o /dev/null "http://127.0.0.1:$port/$bucket" 2>/dev/null; then
			cat "$dir/endpoint"
			exit 0
		fi
		if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
			echo "s3.sh: the server exited:" >&2
			cat "$dir/log" >&2
			exit 1
		fi
		sleep 0.1
	done
	echo "s3.sh: the server did not answer on 127.0.0.1:$port" >&2
	kill "$(cat "$dir/pid")" 2>/dev/null || true
	exit 1
	;;
stop)
	[ -f "$dir/pid" ] || exit 0
	pid=$(cat "$dir/pid")
	if kill "$pid" 2>/dev/null; then
		for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$dir/pid"
	;;
*)
	echo "usage: $0 start|stop DIR [BUCKET]" >&2
	exit 2
	;;
esac
