#!/usr/bin/env bash
# Drives http_server over loopback with bash's /dev/tcp: keep-alive, Server
# and Date headers,
# pipelining, 404, Connection: close, 400 on malformed input (and the server
# keeps serving others), 431 and 413 over the limits, 400 for ambiguous
# framing, a client that goes away mid-request, and a graceful
# stop on SIGTERM. Usage: behaviour_test.sh path/to/http_server
set -euo pipefail
source "$(dirname "$0")/../start_server.sh"
static_dir=$(mktemp -d)
head -c 3000 /dev/urandom | base64 -w 0 >"$static_dir/page.txt"
start_server "$1" --port 0 --workers 2 --idle-timeout 2 --static "$static_dir" --max-body-bytes 1000
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
grep -q $'^Server: tessera\r$' <<<"$r" || fail "no Server header: $r"
grep -qE $'^Date: [A-Z][a-z]{2}, [0-9]{2} [A-Z][a-z]{2} [0-9]{4} [0-9:]{8} GMT\r$' <<<"$r" ||
  fail "no Date header in IMF-fixdate form: $r"

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

# Limits: headers over 32 KiB get 431, a body over --max-body-bytes 413
# (declared or chunked), and the connection is closed.
big=$(head -c 40000 /dev/zero | tr '\0' 'a')
r="$(exchange "GET / HTTP/1.1\r\nHost: x\r\nX-Big: $big\r\n\r\n")"
grep -q '^HTTP/1.1 431 ' <<<"$r" || fail "40 KB of headers: want 431, got: ${r:0:200}"
r="$(exchange 'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n')"
grep -q '^HTTP/1.1 413 ' <<<"$r" || fail "a 5000-byte declared body: want 413, got: $r"
chunk=$(head -c 1500 /dev/zero | tr '\0' 'b')
r="$(exchange "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5dc\r\n$chunk\r\n0\r\n\r\n")"
grep -q '^HTTP/1.1 413 ' <<<"$r" || fail "a 1500-byte chunked body: want 413, got: $r"
# Request smuggling: both framings, or two lengths, are refused with 400.
r="$(exchange 'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n')"
grep -q '^HTTP/1.1 400 ' <<<"$r" || fail "Content-Length with Transfer-Encoding: want 400, got: $r"
r="$(exchange 'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde')"
grep -q '^HTTP/1.1 400 ' <<<"$r" || fail "two Content-Lengths: want 400, got: $r"
[ "$(grep -c '^HTTP/1.1' <<<"$r")" = 1 ] || fail "after a 400 the connection must close: $r"
r="$(exchange 'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc')"
grep -q '200 OK' <<<"$r" || fail "a small body within the limit: $r"

# A client that sends half a request and disappears costs nothing: the next
# client is served at once.
exec 4<>"/dev/tcp/127.0.0.1/$port"
printf 'GET / HT' >&4
exec 4>&-
r="$(exchange 'GET / HTTP/1.0\r\n\r\n')"
grep -q '200 OK' <<<"$r" || fail "after a client left mid-request: $r"

# A graceful stop (SIGTERM): an idle keep-alive connection is closed at once;
# a request in flight is answered, with "Connection: close", then closed.
exec 5<>"/dev/tcp/127.0.0.1/$port"
printf 'GET / HTTP/1.1\r\nHost: x\r\n\r\n' >&5
IFS= read -r -t 2 status <&5 || fail "keep-alive before the stop: no answer"
exec 6<>"/dev/tcp/127.0.0.1/$port"
printf 'GET / HTTP/1.1\r\nHost: x\r\n' >&6  # half a request: in flight from here
# The server must have read those bytes before the signal; nothing tells a
# shell when it has, so give it a second.
sleep 1
kill -TERM "$pid"
timeout 2 cat <&5 >/dev/null || fail "the idle connection was not closed at the stop"
printf '\r\n' >&6
r="$(timeout 3 cat <&6)"
grep -q '200 OK' <<<"$r" || fail "the request in flight at the stop was not answered: $r"
grep -q 'Connection: close' <<<"$r" || fail "the answer during the stop must close: $r"
exec 5>&- 6>&-
rm -rf "$static_dir"
await_stopped
echo "http_server: keep-alive, pipelining, a static file, 404, 400, 431, 413, no smuggling, a vanished client, a graceful SIGTERM: all as expected"
