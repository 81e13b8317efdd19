#!/usr/bin/env bash
# http_server with 10,000 connections open at once (bench/loadgen idle): it
# keeps answering others, its memory per connection stays under a bound, and
# a second wave of 10,000 after the first has gone costs no more than the
# first (nothing kept per closed connection).
# Usage: many_connections_test.sh path/to/http_server path/to/loadgen MAX_KIB_PER_CONNECTION
set -euo pipefail
server=$1 loadgen=$2 max_kib=$3
ulimit -n "$(ulimit -Hn)"
(( $(ulimit -n) >= 12000 )) || { echo "FAIL: the descriptor limit is $(ulimit -n), below 12,000"; exit 1; }
source "$(dirname "$0")/../start_server.sh"
start_server "$server" --port 0 --workers 2 --idle-timeout 60
fail() { echo "FAIL: $*"; exit 1; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$pid/status"; }
fds() { ls "/proc/$pid/fd" | wc -l; }

base_fds=$(fds)
base=$(rss)
wave() {  # opens 10,000 connections for 6 s; prints the RSS once all are open
  "$loadgen" idle --addr "127.0.0.1:$port" -c 10000 -s 6 >"$out.loadgen" &
  lpid=$!
  for _ in $(seq 1 200); do (( $(fds) >= base_fds + 10000 )) && break; sleep 0.05; done
  (( $(fds) >= base_fds + 10000 )) || fail "only $(( $(fds) - base_fds )) of 10,000 connections were accepted"
  peak=$(rss)
  # Served while they are all open.
  r=$(curl -s --max-time 5 "http://127.0.0.1:$port/") || true
  [ "$r" = "Hello, World!" ] || fail "no answer with 10,000 connections open: '$r'"
  wait "$lpid" || fail "loadgen: $(cat "$out.loadgen")"
  # The server lets them go.
  for _ in $(seq 1 200); do (( $(fds) <= base_fds + 10 )) && break; sleep 0.05; done
  (( $(fds) <= base_fds + 10 )) || fail "$(( $(fds) - base_fds )) descriptors still open after the clients left"
}
wave; first=$peak
wave; second=$peak
per=$(( (first - base) / 10 ))  # bytes per connection: KiB * 1024 / 10,000 ≈ KiB / 10 * 1.024
echo "RSS: $base KiB, $first KiB with 10,000 connections (~$per bytes each), $second KiB at the second wave"
(( first - base <= max_kib * 10000 )) || fail "$(( (first - base) / 10000 )) KiB per connection (bound: $max_kib)"
(( second <= first + first / 10 )) || fail "the second wave grew the RSS from $first to $second KiB"
stop_server
echo "http_server: 10,000 connections open, served on, memory bounded and given back"
