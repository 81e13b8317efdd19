#!/usr/bin/env bash
# HTTP servers side by side on this machine: Tessera's samples/http_server,
# nginx (nginx-light, `return 200`), Go's net/http (bench/peers) and a
# std::thread-per-connection server (bench/thread_server, the baseline), each
# pinned to core 0 with one worker/process/GOMAXPROCS=1, wrk pinned to core 1.
# - HTTP requests/s at 100 and 1,000 keep-alive connections (wrk), and latency
#   percentiles at a fixed rate from bench/loadgen's open loop;
# - HTTPS requests/s the same way (keep-alive: one handshake per connection)
#   against nginx and Go with TLS: one certificate (ECDSA P-256, made by
#   scripts/make_certs.sh), TLS 1.3 with TLS_AES_128_GCM_SHA256 on all three;
# - TCP echo round trips/s, 64 B and 4 KiB, 1 and 100 connections, against
#   Go's (bench/peers/echo.go) and the thread-per-connection baseline's,
#   and the ceiling: one spinning thread on one epoll, no runtime
#   (thread_server --mode epoll-echo; it runs alone, as it spins);
# - the server's own CPU per request and per echo round trip at a fixed
#   offered rate every server holds (loadgen's open loop): utime+stime from
#   /proc/PID/stat over the window, for nginx, Go's net/http, fasthttp, the
#   thread-per-connection baseline, and Tessera on epoll and on io_uring;
# - server RSS per idle connection with 10,000 of them open.
# out/netbench.csv, tables with ratios from the same run, and out/netbench.png.
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
scripts/setup.sh wrk nginx-light golang-go golang-github-valyala-fasthttp-dev
cmake --preset release > /dev/null
cmake --build --preset release -j "$(nproc)" --target http_server echo_server loadgen thread_server > /dev/null
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
TESSERA_IO_BACKEND=io_uring start tessera-uring 18085 build/release/samples/http_server --port 18085 --workers 1 --idle-timeout 30
start nginx 18082 nginx -c "$work/nginx.conf" -e "$work/nginx-error.log"
start tessera-echo 17080 build/release/samples/echo_server --port 17080 --workers 1 --idle-timeout 600
GOMAXPROCS=1 start go-echo 17081 "$work/echo" -port 17081
TESSERA_IO_BACKEND=io_uring start tessera-echo-uring 17086 build/release/samples/echo_server --port 17086 --workers 1 --idle-timeout 600
start threads 18084 build/release/bench/thread_server --mode http --port 18084
start threads-echo 17084 build/release/bench/thread_server --mode echo --port 17084
loadgen() { taskset -c 1 build/release/bench/loadgen "$@"; }

echo "server,connections,requests_per_s,p50_ms,p99_ms" > out/netbench.csv
declare -A rps
for conns in 100 1000; do
  for server in tessera:18080 tessera-nodeadline:18083 go:18081 nginx:18082 threads:18084; do
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
for conns in 100 1000; do
  awk -v c="$conns" -v t="${rps[tessera,$conns]}" -v u="${rps[tessera-nodeadline,$conns]}" \
    'BEGIN { printf "timed reads (a deadline on every read) at %s connections: %.0f vs %.0f requests/s without: %+.1f%%\n", c, t, u, (t / u - 1) * 100 }'
done
printf "%-12s %12s %12s %12s %12s %14s %12s %16s\n" connections tessera go nginx threads \
  "tessera/nginx" "tessera/go" "tessera/threads"
for conns in 100 1000; do
  t="${rps[tessera,$conns]}"; g="${rps[go,$conns]}"; n="${rps[nginx,$conns]}"; h="${rps[threads,$conns]}"
  awk -v c="$conns" -v t="$t" -v g="$g" -v n="$n" -v h="$h" \
    'BEGIN { printf "%-12s %12s %12s %12s %12s %13.2fx %11.2fx %15.2fx\n", c, t, g, n, h, t / n, t / g, t / h }'
done

# HTTPS, keep-alive: the same body over TLS 1.3.
echo
declare -A tls_rps
for server in tessera-tls:18443 go-tls:18444 nginx-tls:18445; do
  name="${server%%:*}"; port="${server##*:}"
  cipher=$(openssl s_client -connect "127.0.0.1:$port" </dev/null 2>/dev/null | awk '/^New, / {print $NF}')
  [ "$cipher" = TLS_AES_128_GCM_SHA256 ] || echo "netbench: $name negotiated '$cipher', not TLS_AES_128_GCM_SHA256"
  for conns in 100 1000; do
    echo "netbench: HTTPS $name ($cipher), $conns connections, ${seconds} s ..."
    out="$(taskset -c 1 wrk -t1 -c"$conns" -d"${seconds}s" "https://127.0.0.1:$port/")"
    r="$(awk '/Requests\/sec/ {print $2}' <<<"$out")"
    errs="$(grep -E 'Non-2xx|Socket errors' <<<"$out" || true)"
    [ -n "$errs" ] && echo "  $errs"
    tls_rps["$name,$conns"]="$r"
    echo "https-$name,$conns,$r" >> out/netbench.csv
  done
done
printf "%-18s %12s %12s %12s %14s %12s\n" "HTTPS connections" tessera go nginx tessera/nginx tessera/go
for conns in 100 1000; do
  t="${tls_rps[tessera-tls,$conns]}"; g="${tls_rps[go-tls,$conns]}"; n="${tls_rps[nginx-tls,$conns]}"
  awk -v c="$conns" -v t="$t" -v g="$g" -v n="$n" \
    'BEGIN { printf "%-18s %12s %12s %12s %13.2fx %11.2fx\n", c, t, g, n, t / n, t / g }'
done

# Latency at a fixed request rate (open loop: measured from when each request
# was due), 100 connections.
rate=20000
echo
for server in tessera:18080 go:18081 nginx:18082; do
  name="${server%%:*}"; port="${server##*:}"
  echo "netbench: $name, open loop at $rate requests/s ..."
  line="$(loadgen http --addr "127.0.0.1:$port" -c 100 --rate "$rate" -s "$seconds")"
  echo "  $line"
  echo "$name,open-loop-$rate,$(sed -E 's/.*p50 ([0-9]+) us, p99 ([0-9]+) us, p99.9 ([0-9]+) us/\1,\2,\3/' <<<"$line")" >> out/netbench.csv
done

# TCP echo: round trips per second. A point that follows a 100-connection
# point can run a third slower for several seconds, whichever server it
# measures (the ceiling too), so each row runs twice, in the order below and
# then reversed, and each server keeps the better of its two points.
echo
declare -A echo_rt
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
        r="$(sed -E 's/round trips\/s ([0-9]+).*/\1/' <<<"$line")"
        echo "  $r round trips/s"
        key="$name,$size,$conns"
        if [[ -z ${echo_rt[$key]:-} ]] || ((r > echo_rt[$key])); then echo_rt["$key"]="$r"; fi
      done
    done
    for server in "${echo_servers[@]}"; do
      name="${server%%:*}"
      echo "echo-$name,$size B x $conns,${echo_rt[$name,$size,$conns]}" >> out/netbench.csv
    done
  done
done
printf "\n%-16s %9s %9s %9s %9s %11s %11s %11s %13s\n" "echo (rt/s)" tessera go threads \
  ceiling tessera/go ceiling/go tessera/ceil tessera/threads
for size in 64 4096; do
  for conns in 1 100; do
    t="${echo_rt[tessera,$size,$conns]}"; g="${echo_rt[go,$size,$conns]}"
    h="${echo_rt[threads,$size,$conns]}"; c="${echo_rt[ceiling,$size,$conns]}"
    awk -v k="$size B x $conns" -v t="$t" -v g="$g" -v h="$h" -v c="$c" \
      'BEGIN { printf "%-16s %9s %9s %9s %9s %10.2fx %10.2fx %10.2fx %12.2fx\n", k, t, g, h, c,
               t / g, c / g, t / c, t / h }'
  done
done

# CPU per request: the server's own utime+stime (all its threads, and an
# nginx master's worker) over a window at a fixed offered rate, divided by
# the requests answered in it. Throughput cannot rank servers here (the load
# generator's core bounds it); CPU per request can.
tree_cpu() {  # clock ticks of a process and its children
  local t=0 p
  for p in "$1" $(pgrep -P "$1"); do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done
  echo "$t"
}
hz=$(getconf CLK_TCK)
cpu_rate=20000
declare -A cpu_us
echo
for server in tessera:18080 tessera-uring:18085 nginx:18082 go:18081 fasthttp:18086 threads:18084; do
  name="${server%%:*}"; port="${server##*:}"; pid_var="pid_${name//-/_}"
  echo "netbench: CPU per request, $name, $cpu_rate requests/s ..."
  c0=$(tree_cpu "${!pid_var}")
  line="$(loadgen http --addr "127.0.0.1:$port" -c 100 --rate "$cpu_rate" -s "$seconds")"
  c1=$(tree_cpu "${!pid_var}")
  n="$(sed -E 's/^requests ([0-9]+).*/\1/' <<<"$line")"
  cpu_us["$name"]=$(awk -v t=$((c1 - c0)) -v hz="$hz" -v n="$n" 'BEGIN { printf "%.2f", t / hz * 1e6 / n }')
  echo "  ${cpu_us[$name]} CPU-us per request ($n requests; $line)"
  echo "cpu-http-$name,$cpu_rate/s x 100,${cpu_us[$name]} us/request" >> out/netbench.csv
done
for size in 64 4096; do
  for server in tessera-echo:17080 tessera-echo-uring:17086 go-echo:17081 threads-echo:17084; do
    name="${server%%:*}"; port="${server##*:}"; pid_var="pid_${name//-/_}"
    echo "netbench: CPU per echo round trip, $name, $size B, $cpu_rate round trips/s ..."
    c0=$(tree_cpu "${!pid_var}")
    line="$(loadgen echo --addr "127.0.0.1:$port" -c 100 --size "$size" --rate "$cpu_rate" -s "$seconds")"
    c1=$(tree_cpu "${!pid_var}")
    n="$(sed -E 's/.*round trips ([0-9]+)$/\1/' <<<"$line")"
    cpu_us["$name,$size"]=$(awk -v t=$((c1 - c0)) -v hz="$hz" -v n="$n" 'BEGIN { printf "%.2f", t / hz * 1e6 / n }')
    echo "  ${cpu_us[$name,$size]} CPU-us per round trip ($line)"
    echo "cpu-echo-$name,$size B x 100 at $cpu_rate/s,${cpu_us[$name,$size]} us/round trip" >> out/netbench.csv
  done
done
printf "\n%-22s %8s %8s %8s %8s %8s %8s %13s %10s %14s\n" "CPU-us per request" tessera uring nginx \
  go fasthttp threads tessera/nginx tessera/go tessera/fasthttp
awk -v t="${cpu_us[tessera]}" -v u="${cpu_us[tessera-uring]}" -v n="${cpu_us[nginx]}" -v g="${cpu_us[go]}" \
  -v f="${cpu_us[fasthttp]}" -v h="${cpu_us[threads]}" -v r="$cpu_rate" \
  'BEGIN { printf "%-22s %8s %8s %8s %8s %8s %8s %12.2fx %9.2fx %13.2fx\n", "HTTP at " r "/s", t, u, n, g, f, h, t / n, t / g, t / f }'
printf "%-22s %8s %8s %8s %8s %8s\n" "CPU-us per round trip" tessera uring go threads tessera/go
for size in 64 4096; do
  awk -v t="${cpu_us[tessera-echo,$size]}" -v u="${cpu_us[tessera-echo-uring,$size]}" \
    -v g="${cpu_us[go-echo,$size]}" -v h="${cpu_us[threads-echo,$size]}" -v k="echo $size B" \
    'BEGIN { printf "%-22s %8s %8s %8s %8s %7.2fx\n", k, t, u, g, h, t / g }'
done

# Memory: RSS per idle connection, 10,000 of them.
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
echo
for server in "tessera-echo:17080:$pid_tessera_echo" "go-echo:17081:$pid_go_echo"; do
  IFS=: read -r name port spid <<<"$server"
  before="$(rss "$spid")"
  loadgen idle --addr "127.0.0.1:$port" -c 10000 -s 3 > "$work/idle.out" &
  lp=$!
  sleep 2
  after="$(rss "$spid")"
  wait "$lp" || true
  per="$(( (after - before) * 1024 / 10000 ))"
  echo "netbench: $name: RSS $before -> $after KiB with 10,000 idle connections: $per bytes each ($(head -1 "$work/idle.out"))"
  echo "idle-$name,10000,$per bytes/connection" >> out/netbench.csv
done
# The plot: requests/s and echo round trips/s per server, same run.
{
  for conns in 100 1000; do
    echo "\"HTTP $conns conns\" ${rps[tessera,$conns]} ${rps[go,$conns]} ${rps[nginx,$conns]} ${rps[threads,$conns]} NaN"
  done
  for size in 64 4096; do
    for conns in 1 100; do
      echo "\"echo ${size} B x $conns\" ${echo_rt[tessera,$size,$conns]} ${echo_rt[go,$size,$conns]} NaN ${echo_rt[threads,$size,$conns]} ${echo_rt[ceiling,$size,$conns]}"
    done
  done
} > "$work/plot.dat"
gnuplot -e "dat='$work/plot.dat'; png='out/netbench.png'" bench/plots/netbench.gp
echo "CSV: out/netbench.csv  plot: out/netbench.png"
