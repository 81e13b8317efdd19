#!/usr/bin/env bash
# HTTP servers side by side on this machine: Tessera's samples/http_server,
# nginx (nginx-light, `return 200`), Go's net/http and fasthttp (bench/peers),
# Boost.Beast with C++20 coroutines (bench/peers/beast) and a
# std::thread-per-connection server (bench/thread_server, the baseline), each
# pinned to core 0 with one worker/process/GOMAXPROCS=1, wrk pinned to core 1.
# - HTTP requests/s at 100 and 1,000 keep-alive connections (wrk), and latency
#   percentiles at a fixed rate from bench/loadgen's open loop; every server
#   sends Server, Date, Content-Type and Content-Length with the 13-byte body
#   (each one's response size is printed);
# - HTTPS requests/s the same way (keep-alive: one handshake per connection)
#   against nginx and Go with TLS: one certificate (ECDSA P-256, made by
#   scripts/make_certs.sh), TLS 1.3 with TLS_AES_128_GCM_SHA256 on all three;
# - TCP echo round trips/s, 64 B and 4 KiB, 1 and 100 connections, against
#   Go's (bench/peers/echo.go) and the thread-per-connection baseline's,
#   and the ceiling: one spinning thread on one epoll, no runtime
#   (thread_server --mode epoll-echo; it runs alone, as it spins);
# - the server's own CPU per request and per echo round trip at a fixed
#   offered rate every server holds (loadgen's open loop): utime+stime from
#   /proc/PID/stat over the window, for nginx, Go's net/http, fasthttp, Beast,
#   the thread-per-connection baseline, and Tessera on epoll and on io_uring's
#   completion path (TESSERA_IO_BACKEND=io_uring: tessera-uring in the tables,
#   beside the wrk, open-loop, system-call and idle-memory rows too);
# - system calls per HTTP request (perf's raw_syscalls:sys_enter over a wrk
#   run at 100 connections), for the same servers but the thread baseline;
# - server RSS per idle connection with 10,000 of them open.
# out/netbench.csv, tables with ratios from the same run, and out/netbench.png.
#   bench/netbench.sh [--seconds S]      (default 10 s per point)
# Installs what is missing (wrk, nginx-light, golang-go, linux-perf, the build deps).
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
scripts/setup.sh wrk nginx-light golang-go golang-github-valyala-fasthttp-dev linux-perf
cmake --preset release > /dev/null
cmake --build --preset release -j "$(nproc)" --target http_server echo_server loadgen thread_server beast_hello > /dev/null
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
mkdir -p out
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

# Go peer, built offline with the standard library only.
(cd bench/peers && GOCACHE="$work/gocache" GOFLAGS=-mod=mod GO111MODULE=off \
   go build -o "$work/http_hello" http_hello.go &&
 GOCACHE="$work/gocache" GO111MODULE=off go build -o "$work/echo" echo.go &&
 cd fasthttp_hello && GOPATH=/usr/share/gocode GOCACHE="$work/gocache" GO111MODULE=off GOFLAGS= \
   go build -o "$work/fasthttp_hello" .)

scripts/make_certs.sh "$work/certs" >/dev/null

# nginx: one worker process, the same body; HTTPS on a second port.
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
  server {
    listen 127.0.0.1:18445 ssl reuseport backlog=4096;
    ssl_certificate $work/certs/server.pem;
    ssl_certificate_key $work/certs/server.key;
    ssl_protocols TLSv1.3;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
    location / { default_type text/plain; return 200 "Hello, World!"; }
  }
}
NGINX

start() {  # name, port, command...
  local name="$1" port="$2"; shift 2
  taskset -c 0 "$@" > "$work/$name.out" 2>&1 &
  pids+=($!)
  declare -g "pid_${name//-/_}=$!"
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "netbench.sh: $name did not start on port $port"; cat "$work/$name.out"; exit 1
}
start tessera 18080 build/release/samples/http_server --port 18080 --workers 1 --idle-timeout 30
# The same server without deadlines: what every read's timer costs.
start tessera-nodeadline 18083 build/release/samples/http_server --port 18083 --workers 1 --idle-timeout 0
GOMAXPROCS=1 start go 18081 "$work/http_hello" -port 18081
start tessera-tls 18443 build/release/samples/http_server --port 18443 --workers 1 --idle-timeout 30 \
  --tls-cert "$work/certs/server.pem" --tls-key "$work/certs/server.key" \
  --tls-ciphersuites TLS_AES_128_GCM_SHA256
# Go picks TLS_AES_128_GCM_SHA256 itself on a CPU with AES instructions.
GOMAXPROCS=1 start go-tls 18444 "$work/http_hello" -port 18444 -cert "$work/certs/server.pem" \
  -key "$work/certs/server.key"
GOMAXPROCS=1 start fasthttp 18086 "$work/fasthttp_hello" -port 18086
start beast 18087 build/release/bench/beast_hello --port 18087
TESSERA_IO_BACKEND=io_uring start tessera-uring 18085 build/release/samples/http_server --port 18085 --workers 1 --idle-timeout 30
start nginx 18082 nginx -c "$work/nginx.conf" -e "$work/nginx-error.log"
start tessera-echo 17080 build/release/samples/echo_server --port 17080 --workers 1 --idle-timeout 600
GOMAXPROCS=1 start go-echo 17081 "$work/echo" -port 17081
TESSERA_IO_BACKEND=io_uring start tessera-echo-uring 17086 build/release/samples/echo_server --port 17086 --workers 1 --idle-timeout 600
start threads 18084 build/release/bench/thread_server --mode http --port 18084
start threads-echo 17084 build/release/bench/thread_server --mode echo --port 17084
loadgen() { taskset -c 1 build/release/bench/loadgen "$@"; }

# Every figure is one CSV row: section, server, point, value, unit (and "failed"
# in the value where the point did not measure what it claims). The tables
# with their ratios and the plot's data come from bench/bench_tables.py.
csv=out/netbench.csv
echo "section,server,point,value,unit" > "$csv"
row() { echo "$1,$2,$3,$4,$5" >> "$csv"; }
# wrk's requests/s, or "failed" when any answer was not 2xx or a socket failed.
wrk_rps() {
  if grep -qE 'Non-2xx|Socket errors' <<<"$1"; then
    echo "  $(grep -E 'Non-2xx|Socket errors' <<<"$1")" >&2
    echo failed
  else
    awk '/Requests\/sec/ {print $2}' <<<"$1"
  fi
}

# What each server sends for the same request: bytes of headers and body.
for server in tessera:18080 go:18081 fasthttp:18086 beast:18087 nginx:18082 threads:18084; do
  name="${server%%:*}"; port="${server##*:}"
  sizes=$(curl -s -o /dev/null -w '%{size_header} %{size_download}' "http://127.0.0.1:$port/")
  read -r hb bb <<<"$sizes"
  row bytes "$name" response "$((hb + bb))" bytes
done

for conns in 100 1000; do
  for server in tessera:18080 tessera-uring:18085 tessera-nodeadline:18083 go:18081 fasthttp:18086 \
                beast:18087 nginx:18082 threads:18084; do
    name="${server%%:*}"; port="${server##*:}"
    echo "netbench: $name, $conns connections, ${seconds} s ..."
    out="$(taskset -c 1 wrk -t1 -c"$conns" -d"${seconds}s" --latency "http://127.0.0.1:$port/")"
    row http "$name" "$conns" "$(wrk_rps "$out")" requests/s
    row http-p50 "$name" "$conns" "$(awk '$1=="50%" {print $2}' <<<"$out")" wrk
    row http-p99 "$name" "$conns" "$(awk '$1=="99%" {print $2}' <<<"$out")" wrk
  done
done

# System calls per request: every system call of the server's threads (and of
# an nginx master's worker) counted by perf (raw_syscalls:sys_enter) while wrk
# runs, over the requests wrk completed. The thread-per-connection server
# starts its threads after perf attaches, so it is left out.
for server in tessera:18080 tessera-uring:18085 nginx:18082 go:18081 fasthttp:18086 beast:18087; do
  name="${server%%:*}"; port="${server##*:}"; pid_var="pid_${name//-/_}"
  echo "netbench: system calls per request, $name, 100 connections, ${seconds} s ..."
  targets=$(echo "${!pid_var}" $(pgrep -P "${!pid_var}") | tr ' ' ',')
  out="$(perf stat -x, -e raw_syscalls:sys_enter -p "$targets" -o "$work/perf.out" -- \
           taskset -c 1 wrk -t1 -c100 -d"${seconds}s" "http://127.0.0.1:$port/")"
  calls=$(awk -F, '/raw_syscalls/ {print $1}' "$work/perf.out")
  requests=$(awk '/requests in/ {print $1}' <<<"$out")
  if [[ $calls =~ ^[0-9]+$ && ${requests:-0} -gt 0 && "$(wrk_rps "$out")" != failed ]]; then
    row syscalls "$name" 100 "$(echo "scale=2; $calls / $requests" | bc)" calls/request
  else
    row syscalls "$name" 100 failed calls/request
  fi
done

# HTTPS, keep-alive: the same body over TLS 1.3.
for server in tessera-tls:18443 go-tls:18444 nginx-tls:18445; do
  name="${server%%:*}"; port="${server##*:}"
  cipher=$(openssl s_client -connect "127.0.0.1:$port" </dev/null 2>/dev/null | awk '/^New, / {print $NF}')
  [ "$cipher" = TLS_AES_128_GCM_SHA256 ] || echo "netbench: $name negotiated '$cipher', not TLS_AES_128_GCM_SHA256"
  for conns in 100 1000; do
    echo "netbench: HTTPS $name ($cipher), $conns connections, ${seconds} s ..."
    out="$(taskset -c 1 wrk -t1 -c"$conns" -d"${seconds}s" "https://127.0.0.1:$port/")"
    row https "${name%-tls}" "$conns" "$(wrk_rps "$out")" requests/s
  done
done

# Latency at a fixed request rate (open loop: measured from when each request
# was due), 100 connections.
rate=20000
for server in tessera:18080 tessera-uring:18085 go:18081 nginx:18082; do
  name="${server%%:*}"; port="${server##*:}"
  echo "netbench: $name, open loop at $rate requests/s ..."
  line="$(loadgen http --addr "127.0.0.1:$port" -c 100 --rate "$rate" -s "$seconds")"
  echo "  $line"
  read -r p50 p99 p999 < <(sed -E 's/.*p50 ([0-9]+) us, p99 ([0-9]+) us, p99.9 ([0-9]+) us.*/\1 \2 \3/' <<<"$line")
  row open-loop-p50 "$name" "$rate" "$p50" us
  row open-loop-p99 "$name" "$rate" "$p99" us
  row open-loop-p99.9 "$name" "$rate" "$p999" us
done

# TCP echo: round trips per second. A point that follows a 100-connection
# point can run a third slower for several seconds, whichever server it
# measures (the ceiling too), so each row runs twice, in the order below and
# then reversed; the tables keep each server's better point.
echo_servers=(tessera:17080 go:17081 threads:17084 ceiling:17085)
echo_reversed=()
for ((i = ${#echo_servers[@]} - 1; i >= 0; i--)); do echo_reversed+=("${echo_servers[i]}"); done
for size in 64 4096; do
  for conns in 1 100; do
    for pass in 1 2; do
      if ((pass == 1)); then order=("${echo_servers[@]}"); else order=("${echo_reversed[@]}"); fi
      for server in "${order[@]}"; do
        name="${server%%:*}"; port="${server##*:}"
        echo "netbench: echo $name, $size B, $conns connections (pass $pass of 2) ..."
        if [[ $name == ceiling ]]; then
          start ceiling 17085 build/release/bench/thread_server --mode epoll-echo --port 17085
        fi
        line="$(loadgen echo --addr "127.0.0.1:$port" -c "$conns" --size "$size" -s "$seconds")"
        if [[ $name == ceiling ]]; then kill "$pid_ceiling"; wait "$pid_ceiling" 2>/dev/null || true; fi
        echo "  $line"
        r="$(sed -E 's/round trips\/s ([0-9]+).*/\1/' <<<"$line")"
        grep -q 'failed connections 0,' <<<"$line" || r=failed
        row echo "$name" "$size B x $conns" "$r" "round trips/s"
      done
    done
  done
done

# CPU per request: the server's own utime+stime (all its threads, and an
# nginx master's worker) over a window at a fixed offered rate, and the
# requests answered in it. Throughput cannot rank servers here (the load
# generator's core bounds it); CPU per request can.
tree_cpu() {  # clock ticks of a process and its children
  local t=0 p
  for p in "$1" $(pgrep -P "$1"); do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done
  echo "$t"
}
hz=$(getconf CLK_TCK)
cpu_rate=20000
for server in tessera:18080 tessera-uring:18085 nginx:18082 go:18081 fasthttp:18086 beast:18087 \
              threads:18084; do
  name="${server%%:*}"; port="${server##*:}"; pid_var="pid_${name//-/_}"
  echo "netbench: CPU per request, $name, $cpu_rate requests/s ..."
  c0=$(tree_cpu "${!pid_var}")
  line="$(loadgen http --addr "127.0.0.1:$port" -c 100 --rate "$cpu_rate" -s "$seconds")"
  c1=$(tree_cpu "${!pid_var}")
  echo "  $line"
  row cpu-http-ticks "$name" "$cpu_rate" "$((c1 - c0))" "1/$hz s"
  row cpu-http-requests "$name" "$cpu_rate" "$(sed -E 's/^requests ([0-9]+).*/\1/' <<<"$line")" requests
done
for size in 64 4096; do
  for server in tessera-echo:17080 tessera-echo-uring:17086 go-echo:17081 threads-echo:17084; do
    name="${server%%:*}"; port="${server##*:}"; pid_var="pid_${name//-/_}"
    echo "netbench: CPU per echo round trip, $name, $size B, $cpu_rate round trips/s ..."
    c0=$(tree_cpu "${!pid_var}")
    line="$(loadgen echo --addr "127.0.0.1:$port" -c 100 --size "$size" --rate "$cpu_rate" -s "$seconds")"
    c1=$(tree_cpu "${!pid_var}")
    echo "  $line"
    system="${name%-echo*}${name#*-echo}"  # tessera-echo-uring: tessera-uring
    row cpu-echo-ticks "$system" "$size" "$((c1 - c0))" "1/$hz s"
    row cpu-echo-round-trips "$system" "$size" "$(sed -E 's/.*round trips ([0-9]+)$/\1/' <<<"$line")" \
      "round trips"
  done
done

# Memory: RSS per idle connection, 10,000 of them, measured once loadgen
# says all are open (it prints "open N (failed F)" then holds them); a point
# with fewer open is reported failed, not divided.
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
for server in "tessera-echo:17080:$pid_tessera_echo" "tessera-echo-uring:17086:$pid_tessera_echo_uring" \
              "go-echo:17081:$pid_go_echo"; do
  IFS=: read -r name port spid <<<"$server"
  before="$(rss "$spid")"
  loadgen idle --addr "127.0.0.1:$port" -c 10000 -s 3 > "$work/idle.out" &
  lp=$!
  for _ in $(seq 1 600); do grep -q '^open ' "$work/idle.out" && break; sleep 0.1; done
  after="$(rss "$spid")"
  open="$(sed -n 's/^open \([0-9]*\) .*/\1/p' "$work/idle.out")"
  wait "$lp" || true
  echo "netbench: $name: RSS $before -> $after KiB, $(head -1 "$work/idle.out")"
  system="${name%-echo*}${name#*-echo}"  # tessera-echo-uring: tessera-uring
  if [[ ${open:-0} -eq 10000 ]]; then
    row idle "$system" 10000 "$(( (after - before) * 1024 / 10000 ))" bytes/connection
  else
    row idle "$system" 10000 failed "bytes/connection (${open:-0} open)"
  fi
done

# The tables, each figure beside its peers' with ratios, and the plot.
echo
bench/bench_tables.py netbench "$csv" "$work/plot.dat"
gnuplot -e "dat='$work/plot.dat'; png='out/netbench.png'" bench/plots/netbench.gp
echo "CSV: $csv  plot: out/netbench.png"
