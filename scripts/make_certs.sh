#!/usr/bin/env bash
# Makes a throw-away certificate authority and a server certificate for
# "localhost" and 127.0.0.1 (ECDSA P-256), for the TLS tests and the HTTPS
# benchmarks:
#   scripts/make_certs.sh DIR   # DIR/ca.pem, DIR/server.pem (chain), DIR/server.key
set -euo pipefail
dir=${1:?usage: make_certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
[ -s server.pem ] && [ -s server.key ] && [ -s ca.pem ] && exit 0
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
  -subj "/CN=Tessera test CA" -keyout ca.key -out ca.pem 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -subj "/CN=localhost" -keyout server.key -out server.csr 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 3650 \
  -extfile server.ext -out server.crt 2>/dev/null
cat server.crt ca.pem >server.pem
rm -f server.csr server.ext ca.srl
