#!/bin/bash
# measure-serve.sh BINARY DATADIR PORT [QUERY...]
#
# Measures a parley binary on a data directory (one filled by
# TestFillDataDir): the time from starting `parley serve` until /api/health
# answers 200, then for each QUERY three times the status, size and latency
# of GET /api/sessions?QUERY, and the daemon's memory (VmRSS, VmHWM, and
# RssAnon, its own memory, as opposed to RssFile, the mapped database pages
# that the page cache shares) after them. It stops the daemon at the end.
#
#	go build -o /tmp/parley ./cmd/parley
#	cmd/parley/internal/daemon/testdata/measure-serve.sh /tmp/parley /tmp/parley-100k 18765 "" limit=1000 status=closed
set -u
bin=$1 dir=$2 port=$3
shift 3
log=$(mktemp)
start=$(date +%s.%N)
$bin serve --data-dir "$dir" --listen "127.0.0.1:$port" >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT
until curl -fs -o /dev/null "http://127.0.0.1:$port/api/health"; do
	if ! kill -0 $pid 2>/dev/null; then
		echo "parley serve exited:"
		cat "$log"
		exit 1
	fi
	sleep 0.01
done
end=$(date +%s.%N)
echo "start-up until /api/health 200: $(echo "$end - $start" | bc) s"
mem() { grep -E 'VmRSS|VmHWM|RssAnon|RssFile' /proc/$pid/status | tr -s ' \t' ' ' | tr '\n' ' '; echo; }
echo "after start: $(mem)"
for q in "$@"; do
	for _ in 1 2 3; do
		curl -s -o /dev/null -w "GET /api/sessions?$q: %{http_code}, %{size_download} bytes in %{time_total} s\n" \
			"http://127.0.0.1:$port/api/sessions?$q"
	done
	echo "  after: $(mem)"
done
