#!/usr/bin/env bash
# Drives http_server over loopback with bash's /dev/tcp: keep-alive,
# pipelining, 404, Connection: close, 400 on malformed input (and the server
# keeps serving others), a client that goes away mid-request, and a clean
# stop on SIGTERM. Usage: behaviour_test.sh path/to/http_server
set -euo pipefail
source "$(dirname "$0")/../start_server.sh"
static_dir=$(mktemp -d)
head -c 3000 /dev/urandom | base64 -w 0 >"$static_dir/page.txt"
start_server "$1" --port 0 --workers 2 --idle-timeout 2 --static "$static_dir"
fail() { echo "FAIL: $*"; rm -rf "$static_dir"; exit 1; }

# exchange REQUEST-BYTES: sends them on a new connection, prints everything
# the server sends until it closes (at most 5 s).
exchange() {
  exec 3<>"/dev/tcp/127.0.0.1/$port"
  printf "%b" "$1" >&3
  timeout 5 cat <&3 || true
  exec 3>&-
}

r="$(exchange 'GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')"
[ "$(grep -c 'HTTP/1.1 200 OK' <<<"$r")" = 2 ] || fail "keep-alive: want two 200s, got: $r"
grep -q 'Connection: close' <<<"$r" || fail "keep-alive: the closing response must say so"
grep -q 'Hello, World!' <<<"$r" || fail "no body"

r="$(exchange 'GET /nope HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')"
first="$(grep -m1 '^HTTP/1.1' <<<"$r")"
[[ "$first" == *404* ]] || fail "pipelining: the first answer must be the 404, got: $r"
grep -q '200 OK' <<<"$r" || fail "pipelining: the second answer is missing: $r"

r="$(exchange 'GET /static/page.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')"
body="${r#*$'\r\n\r\n'}"
[ "$body" = "$(cat "$static_dir/page.txt")" ] || fail "static file: the body differs from the file"
grep -q "Content-Length: $(stat -c %s "$static_dir/page.txt")" <<<"$r" || fail "static file: Content-Length"
r="$(exchange 'GET /static/../page.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')"
grep -q '404 Not Found' <<<"$r" || fail "a path leaving the static directory must be 404: $r"
r="$(exchange 'GET /static/missing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')"
grep -q '404 Not Found' <<<"$r" || fail "a missing file must be 404: $r"

r="$(exchange 'BLAH BLAH\r\n\r\n')"
grep -q '400 Bad Request' <<<"$r" || fail "malformed input: want 400, got: $r"

# A client that sends half a request and disappears costs nothing: the next
# client is served at once.
exec 4<>"/dev/tcp/127.0.0.1/$port"
printf 'GET / HT' >&4
exec 4>&-
r="$(exchange 'GET / HTTP/1.0\r\n\r\n')"
grep -q '200 OK' <<<"$r" || fail "after a client left mid-request: $r"

stop_server
rm -rf "$static_dir"
echo "http_server: keep-alive, pipelining, a static file, 404, 400, a vanished client, SIGTERM: all as expected"
