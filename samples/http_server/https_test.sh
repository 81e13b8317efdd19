#!/usr/bin/env bash
# http_server with --tls-cert/--tls-key over loopback: curl (verifying against
# the test CA, SNI "localhost") gets its pages over one kept-alive TLS
# connection with ALPN http/1.1; a wrong CA is refused; a client speaking
# plain HTTP to the TLS port is dropped and costs the others nothing; the
# server stops on SIGTERM. Usage: https_test.sh path/to/http_server
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../start_server.sh"
certs=$(mktemp -d)
"$here/../../scripts/make_certs.sh" "$certs"
start_server "$1" --port 0 --workers 2 --idle-timeout 5 \
  --tls-cert "$certs/server.pem" --tls-key "$certs/server.key"
fail() { echo "FAIL: $*"; rm -rf "$certs"; exit 1; }
url="https://localhost:$port"

r=$(curl -sS -v --http1.1 --cacert "$certs/ca.pem" --resolve "localhost:$port:127.0.0.1" \
  "$url/" "$url/nope" 2>&1) || fail "curl over TLS: $r"
grep -q 'Hello, World!' <<<"$r" || fail "no body over TLS: $r"
grep -q 'HTTP/1.1 404' <<<"$r" || fail "the second request: $r"
grep -qi 'ALPN.*http/1.1' <<<"$r" || fail "ALPN did not agree on http/1.1: $r"
grep -qi 'Re-using existing connection' <<<"$r" || fail "the TLS connection was not kept alive: $r"

# A CA we do not have: curl must refuse the certificate.
other=$(mktemp -d)
"$here/../../scripts/make_certs.sh" "$other"
if curl -sS --cacert "$other/ca.pem" --resolve "localhost:$port:127.0.0.1" "$url/" 2>/dev/null; then
  fail "a certificate from an unknown CA was accepted"
fi
rm -rf "$other"

# Plain HTTP to the TLS port: dropped; the server serves on.
r=$(printf 'GET / HTTP/1.1\r\nHost: x\r\n\r\n' | timeout 5 curl -s --max-time 3 "http://127.0.0.1:$port/" || true)
grep -q 'Hello' <<<"$r" && fail "plain HTTP was answered on the TLS port"
r=$(curl -sS --cacert "$certs/ca.pem" --resolve "localhost:$port:127.0.0.1" "$url/") ||
  fail "after a plain-text client"
[ "$r" = "Hello, World!" ] || fail "after a plain-text client: $r"

stop_server
rm -rf "$certs"
echo "http_server over TLS: verified, ALPN, kept alive, wrong CA refused, plain HTTP dropped, stopped"
