#!/usr/bin/env bash
# Starts echo_server on a free loopback port, waits for its "listening on" line,
# echoes a line through bash's /dev/tcp, then stops it with SIGTERM and checks
# that it exits cleanly. Usage: smoke_test.sh path/to/echo_server
set -euo pipefail
server="$1"
out="$(mktemp)"
trap 'rm -f "$out"; kill "$pid" 2>/dev/null || true' EXIT
"$server" --port 0 --workers 2 --idle-timeout 2 >"$out" &
pid=$!
for _ in $(seq 1 100); do grep -q "listening on" "$out" && break; sleep 0.05; done
addr="$(sed -n 's/^listening on //p' "$out")"
[ -n "$addr" ] || { echo "echo_server did not report its address"; cat "$out"; exit 1; }
port="${addr##*:}"
exec 3<>"/dev/tcp/127.0.0.1/$port"
echo "hello tessera" >&3
read -r -t 5 reply <&3
exec 3>&-
[ "$reply" = "hello tessera" ] || { echo "echoed '$reply'"; exit 1; }
kill -TERM "$pid"
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$pid" 2>/dev/null; then echo "echo_server did not stop on SIGTERM"; exit 1; fi
wait "$pid"
grep -q "stopped" "$out" || { echo "echo_server did not stop cleanly"; cat "$out"; exit 1; }
echo "echo_server: echoed a line and stopped on SIGTERM"
