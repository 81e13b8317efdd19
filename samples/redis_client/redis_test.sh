#!/usr/bin/env bash
# Starts a private redis-server on a free loopback port (no persistence),
# runs redis_client against it, and stops it.
# Usage: redis_test.sh path/to/redis_client
set -euo pipefail
command -v redis-server >/dev/null || { echo "FAIL: no redis-server (Debian redis-server)"; exit 1; }
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
  --daemonize no >"$dir/redis.log" 2>&1 &
rpid=$!
trap 'kill "$rpid" 2>/dev/null || true; wait "$rpid" 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
"$1" --addr "127.0.0.1:$port" --fibers 100 --ops 500
