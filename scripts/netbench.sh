#!/usr/bin/env bash
# HTTP servers side by side on this machine: Tessera's samples/http_server,
# nginx (nginx-light, `return 200`), and Go's net/http (samples/peers), each
# pinned to core 0 with one worker/process/GOMAXPROCS=1, wrk pinned to core 1.
# Requests/s at 100 and 1,000 keep-alive connections; out/netbench.csv and a
# table with ratios to nginx and Go from the same run.
#   scripts/netbench.sh [--seconds S]      (default 10 s per point)
# Installs what is missing (wrk, nginx-light, golang-go, the build deps).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=10
while (($#)); do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --quick) seconds=3; shift ;;
    *) echo "netbench.sh: unknown option $1 (try --seconds S or --quick)"; exit 2 ;;
  esac
done
scripts/setup.sh
missing=()
for p in wrk nginx-light golang-go; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "netbench.sh: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
cmake --preset release > /dev/null
cmake --build --preset release -j "$(nproc)" --target http_server > /dev/null
mkdir -p out
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

# Go peer, built offline with the standard library only.
(cd samples/peers && GOCACHE="$work/gocache" GOFLAGS=-mod=mod GO111MODULE=off \
   go build -o "$work/http_hello" http_hello.go)

# nginx: one worker process, the same body.
cat > "$work/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:18082 reuseport backlog=4096;
    location / { default_type text/plain; return 200 "Hello, World!"; }
  }
}
NGINX

start() {  # name, port, command...
  local name="$1" port="$2"; shift 2
  taskset -c 0 "$@" > "$work/$name.out" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "netbench.sh: $name did not start on port $port"; cat "$work/$name.out"; exit 1
}
start tessera 18080 build/release/samples/http_server --port 18080 --workers 1 --idle-timeout 30
GOMAXPROCS=1 start go 18081 "$work/http_hello" -port 18081
start nginx 18082 nginx -c "$work/nginx.conf" -e "$work/nginx-error.log"

echo "server,connections,requests_per_s,p50_ms,p99_ms" > out/netbench.csv
declare -A rps
for conns in 100 1000; do
  for server in tessera:18080 go:18081 nginx:18082; do
    name="${server%%:*}"; port="${server##*:}"
    echo "netbench: $name, $conns connections, ${seconds} s ..."
    out="$(taskset -c 1 wrk -t1 -c"$conns" -d"${seconds}s" --latency "http://127.0.0.1:$port/")"
    r="$(awk '/Requests\/sec/ {print $2}' <<<"$out")"
    p50="$(awk '$1=="50%" {print $2}' <<<"$out")"
    p99="$(awk '$1=="99%" {print $2}' <<<"$out")"
    errs="$(grep -E 'Non-2xx|Socket errors' <<<"$out" || true)"
    [ -n "$errs" ] && echo "  $errs"
    rps["$name,$conns"]="$r"
    echo "$name,$conns,$r,$p50,$p99" >> out/netbench.csv
  done
done
echo
printf "%-12s %14s %14s %14s %16s %16s\n" connections tessera go nginx "tessera/nginx" "tessera/go"
for conns in 100 1000; do
  t="${rps[tessera,$conns]}"; g="${rps[go,$conns]}"; n="${rps[nginx,$conns]}"
  awk -v c="$conns" -v t="$t" -v g="$g" -v n="$n" \
    'BEGIN { printf "%-12s %14s %14s %14s %15.2fx %15.2fx\n", c, t, g, n, t / n, t / g }'
done
echo "CSV: out/netbench.csv (requests/s; wrk latency percentiles, which a closed loop understates)"
