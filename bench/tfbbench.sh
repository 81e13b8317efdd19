#!/usr/bin/env bash
# TechEmpower's six test types side by side, against one private PostgreSQL
# (scripts/postgres.sh, TechEmpower's schema): samples/tfb_server beside Go's
# net/http + database/sql + lib/pq and fasthttp + the same database code
# (bench/peers/tfb). Each server has one core's worth of threads (1 worker,
# GOMAXPROCS=1) and a pool of 16 database connections; wrk (1 thread) drives
# each type at 64 and 256 connections (plaintext pipelined 16 deep, as
# TechEmpower does). The database, the server and wrk share the 2 cores, so
# beside each figure comes where the run's CPU went: the server's, the
# database's and wrk's CPU seconds, read from /proc/PID/stat.
#   bench/tfbbench.sh [--seconds S] [--quick]     (default 5 s per point)
# Writes out/tfbbench.csv and out/tfbbench.png; prints the table with ratios.
# Installs what is missing (postgresql, golang-go, lib/pq, fasthttp, wrk).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=5
while (($#)); do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --quick) seconds=2; shift ;;
    *) echo "tfbbench.sh: unknown option $1 (try --seconds S or --quick)"; exit 2 ;;
  esac
done
scripts/setup.sh wrk golang-go golang-github-lib-pq-dev golang-github-valyala-fasthttp-dev gnuplot-nox
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target tfb_server >/dev/null
ulimit -n 65536 2>/dev/null || true
mkdir -p out
work="$(mktemp -d)"
chmod 755 "$work"  # the database runs as the postgres user, inside it
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  scripts/postgres.sh stop "$work/pg" || true
  rm -rf "$work"
}
trap cleanup EXIT

# The Go peers, built offline from Debian's Go packages (GOPATH mode).
mkdir -p "$work/gopath/src"
ln -s "$PWD/bench/peers/tfb" "$work/gopath/src/tfbpeer"
for p in nethttp fasthttp; do
  (cd "$work/gopath/src/tfbpeer" && GOPATH="$work/gopath:/usr/share/gocode" GO111MODULE=off \
     GOFLAGS= GOCACHE="$work/gocache" go build -o "$work/tfb_$p" "./$p")
done

echo "tfbbench: starting PostgreSQL"
db=$(scripts/postgres.sh start "$work/pg")
postmaster=$(head -1 "$work/pg/data/postmaster.pid")

start() {  # name, port, command...
  local name="$1" port="$2"; shift 2
  "$@" >"$work/$name.out" 2>&1 &
  pids+=($!)
  declare -g "pid_$name=$!"
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "tfbbench.sh: $name did not start on port $port"; cat "$work/$name.out"; exit 1
}
start tessera 18090 build/release/samples/tfb_server --port 18090 --workers 1 --db "$db" --db-pool 16
GOMAXPROCS=1 start nethttp 18091 "$work/tfb_nethttp" -port 18091 -db "$db" -pool 16
GOMAXPROCS=1 start fasthttp 18092 "$work/tfb_fasthttp" -port 18092 -db "$db" -pool 16
servers=(tessera nethttp fasthttp)
declare -A port=([tessera]=18090 [nethttp]=18091 [fasthttp]=18092)
types=(plaintext json db "queries?queries=20" fortunes "updates?queries=20")

# Every server answers every type before anything is measured.
for s in "${servers[@]}"; do
  for t in "${types[@]}"; do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${port[$s]}/$t")
    [ "$code" = 200 ] || { echo "tfbbench.sh: $s answered /$t with $code"; exit 1; }
  done
done

cat >"$work/pipeline.lua" <<'LUA'
-- 16 requests per write, as TechEmpower's plaintext test sends them.
init = function(args)
  local r = {}
  for i = 1, 16 do r[i] = wrk.format(nil, wrk.path) end
  req = table.concat(r)
end
request = function() return req end
LUA

cpu() {  # utime+stime in clock ticks of a process (all its threads)
  awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}
db_cpu() {  # the postmaster and its children
  local t=0 c
  for c in "$postmaster" $(pgrep -P "$postmaster"); do t=$((t + $(cpu "$c"))); done
  echo "$t"
}
hz=$(getconf CLK_TCK)
csv=out/tfbbench.csv
echo "server,type,connections,requests_per_s,server_cpu_s,db_cpu_s,wrk_cpu_s,seconds" >"$csv"
total=$((${#servers[@]} * ${#types[@]} * 2)); n=0
for t in "${types[@]}"; do
  for c in 64 256; do
    for s in "${servers[@]}"; do
      n=$((n + 1))
      printf '\rtfbbench: %d/%d %-10s %-20s c=%-4d' "$n" "$total" "$s" "$t" "$c" >&2
      pid_var="pid_$s"
      script=(); [ "$t" = plaintext ] && script=(-s "$work/pipeline.lua")
      s0=$(cpu "${!pid_var}"); d0=$(db_cpu)
      wrk -t1 -c"$c" -d"${seconds}s" "${script[@]}" "http://127.0.0.1:${port[$s]}/$t" >"$work/wrk.out" &
      wpid=$!
      w1=0
      while kill -0 "$wpid" 2>/dev/null; do w1=$(cpu "$wpid"); sleep 0.2; done
      wait "$wpid"
      s1=$(cpu "${!pid_var}"); d1=$(db_cpu)
      rps=$(awk '/Requests\/sec/ {print $2}' "$work/wrk.out")
      errs=$(awk '/Non-2xx|Socket errors/ {print}' "$work/wrk.out")
      # A point with any non-2xx answer or socket error is failed, not throughput.
      if [ -n "$errs" ]; then
        echo -e "\ntfbbench: $s /$t c=$c failed: $errs" >&2
        rps=failed
      fi
      echo "$s,${t%%\?*},$c,$rps,$(echo "scale=2; ($s1-$s0)/$hz" | bc),$(echo "scale=2; ($d1-$d0)/$hz" | bc),$(echo "scale=2; $w1/$hz" | bc),$seconds" >>"$csv"
    done
  done
done
echo >&2

# The table of ratios, and the plot (requests/s per type at 256 connections).
bench/bench_tables.py tfbbench "$csv" "$work/plot.dat"
gnuplot -e "dat='$work/plot.dat'; png='out/tfbbench.png'" bench/plots/tfbbench.gp
echo "tfbbench: wrote $csv and out/tfbbench.png"
