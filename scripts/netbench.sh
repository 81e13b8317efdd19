#!/usr/bin/env bash
# HTTP servers side by side on this machine: Tessera's samples/http_server,
# nginx (nginx-light, `return 200`), Go's net/http (bench/peers) and a
# std::thread-per-connection server (bench/thread_server, the baseline), each
# pinned to core 0 with one worker/process/GOMAXPROCS=1, wrk pinned to core 1.
# - HTTP requests/s at 100 and 1,000 keep-alive connections (wrk), and latency
#   percentiles at a fixed rate from bench/loadgen's open loop;
# - TCP echo round trips/s, 64 B and 4 KiB, 1 and 100 connections, against
#   Go's (bench/peers/echo.go) and the thread-per-connection baseline's,
#   and the ceiling: one spinning thread on one epoll, no runtime
#   (thread_server --mode epoll-echo; it runs alone, as it spins);
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
 GOCACHE="$work/gocache" GO111MODULE=off go build -o "$work/echo" echo.go)

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
start nginx 18082 nginx -c "$work/nginx.conf" -e "$work/nginx-error.log"
start tessera-echo 17080 build/release/samples/echo_server --port 17080 --workers 1 --idle-timeout 600
GOMAXPROCS=1 start go-echo 17081 "$work/echo" -port 17081
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

# TCP echo: round trips per second.
echo
declare -A echo_rt
for size in 64 4096; do
  for conns in 1 100; do
    for server in tessera:17080 go:17081 threads:17084 ceiling:17085; do
      name="${server%%:*}"; port="${server##*:}"
      echo "netbench: echo $name, $size B, $conns connections ..."
      if [[ $name == ceiling ]]; then
        start ceiling 17085 build/release/bench/thread_server --mode epoll-echo --port 17085
      fi
      line="$(loadgen echo --addr "127.0.0.1:$port" -c "$conns" --size "$size" -s "$seconds")"
      if [[ $name == ceiling ]]; then kill "$pid_ceiling"; wait "$pid_ceiling" 2>/dev/null || true; fi
      r="$(sed -E 's/round trips\/s ([0-9]+).*/\1/' <<<"$line")"
      echo_rt["$name,$size,$conns"]="$r"
      echo "echo-$name,$size B x $conns,$r" >> out/netbench.csv
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
