#!/usr/bin/env bash
# Peak memory of `parley serve` under eight concurrent 20 MB POSTs to /mcp,
# first with Content-Length, then chunked (issue 12: bodies are bounded).
#
#   go build -o /tmp/parley ./cmd/parley
#   cmd/parley/testdata/oversized-bodies.sh /tmp/parley
#
# Prints each answer's status and the daemon's resident memory at start and
# at its peak (VmHWM). Linux only (/proc); needs curl.
set -euo pipefail
bin=${1:?usage: $0 PARLEY_BINARY}
dir=$(mktemp -d)
body=$dir/body.txt
head -c 20000000 /dev/zero | tr '\0' 'x' >"$body"
port=$((20000 + RANDOM % 10000))
"$bin" serve --data-dir "$dir/data" --listen "127.0.0.1:$port" >/dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do curl -fs "127.0.0.1:$port/api/health" >/dev/null && break; sleep 0.1; done
start=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
for mode in length chunked; do
	pids=()
	for _ in $(seq 8); do
		if [ $mode = chunked ]; then
			curl -s -o /dev/null -w '%{http_code} ' -H 'Transfer-Encoding: chunked' -H 'Content-Type: application/json' --data-binary @"$body" "127.0.0.1:$port/mcp" &
		else
			curl -s -o /dev/null -w '%{http_code} ' -H 'Content-Type: application/json' --data-binary @"$body" "127.0.0.1:$port/mcp" &
		fi
		pids+=($!)
	done
	wait "${pids[@]}"
	echo "($mode)"
done
echo "RSS at start ${start} KiB, peak $(awk '/VmHWM/ {print $2}' /proc/$pid/status) KiB"
