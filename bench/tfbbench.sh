#!/usr/bin/env bash
# TechEmpower's six test types side by side, under TechEmpower's rules, against
# one private PostgreSQL (scripts/postgres.sh, TechEmpower's schema):
#   tessera   samples/tfb_server (pq pipelines with a Sync per statement)
#   nethttp   Go net/http, database/sql + lib/pq, html/template (TechEmpower's go-std)
#   fasthttp  Go fasthttp, a pgx pool, quicktemplate, struct JSON (TechEmpower's fasthttp)
#   beast     Boost.Beast on Asio, C++20 coroutines (plaintext and json only)
# Placement, the same for every server: the server on CPU 1 (one worker,
# GOMAXPROCS=1, one io_context), wrk (one thread) and PostgreSQL on CPU 0;
# pools of 16 database connections. Every point runs three times, the servers
# in a rotated order each time; the median is kept and the spread (max-min
# over median) printed. A point with any non-2xx answer or socket error in
# any run is reported as failed. Levels as TechEmpower's: 16…512 connections
# for plaintext (pipelined 16 deep), json, db and fortunes; 1, 5, 10, 15 and
# 20 queries for /queries and /updates (at 256 connections, the headline's).
# Beside each point: CPU per request of the server, the database and wrk
# (/proc/PID/stat), and each server's response size in bytes. wrk sends
# TechEmpower's headers, with its 8 s timeout; each type is warmed up first.
#   bench/tfbbench.sh [--seconds S] [--quick]   (5 s per run; --quick: 2 s,
#                                                256 connections and 20 queries only)
# Writes out/tfbbench.csv and out/tfbbench.png; prints the tables with ratios.
# Installs what is missing (postgresql, golang-go, lib/pq, pgx, fasthttp,
# quicktemplate, wrk, gnuplot).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=5
conns=(16 32 64 128 256 512)
counts=(1 5 10 15 20)
while (($#)); do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --quick) seconds=2; conns=(256); counts=(20); shift ;;
    *) echo "tfbbench.sh: unknown option $1 (try --seconds S or --quick)"; exit 2 ;;
  esac
done
repeats=3
scripts/setup.sh wrk golang-go golang-github-lib-pq-dev golang-github-valyala-fasthttp-dev \
  golang-github-jackc-pgx-v4-dev golang-github-valyala-quicktemplate-dev gnuplot-nox
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target tfb_server beast_hello >/dev/null
ulimit -n 65536 2>/dev/null || true
[ "$(nproc)" -ge 2 ] || { echo "tfbbench.sh: needs two CPUs (server on one, wrk and PostgreSQL on the other)"; exit 1; }
mkdir -p out
work="$(mktemp -d)"
chmod 755 "$work"  # the database runs as the postgres user, inside it
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  scripts/postgres.sh stop "$work/pg" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# The Go peers, built offline from Debian's Go packages (GOPATH mode); the
# fasthttp peer's page compiled by quicktemplate's qtc, itself built from
# Debian's sources.
gopath="$work/gopath"
mkdir -p "$gopath/src"
cp -r bench/peers/tfb "$gopath/src/tfbpeer"
gobuild() { (cd "$gopath/src/tfbpeer" && GOPATH="$gopath:/usr/share/gocode" GO111MODULE=off \
               GOFLAGS= GOCACHE="$work/gocache" go build "$@"); }
gobuild -o "$work/qtc" github.com/valyala/quicktemplate/qtc
"$work/qtc" -dir="$gopath/src/tfbpeer/fasthttp/templates" 2>/dev/null
for p in nethttp fasthttp; do gobuild -o "$work/tfb_$p" "./$p"; done

echo "tfbbench: starting PostgreSQL on CPU 0"
db=$(taskset -c 0 scripts/postgres.sh start "$work/pg")
postmaster=$(head -1 "$work/pg/data/postmaster.pid")

start() {  # name, port, command...: on CPU 1
  local name="$1" port="$2"; shift 2
  taskset -c 1 "$@" >"$work/$name.out" 2>&1 &
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
start beast 18093 build/release/bench/beast_hello --port 18093
declare -A port=([tessera]=18090 [nethttp]=18091 [fasthttp]=18092 [beast]=18093)
db_servers=(tessera nethttp fasthttp)
all_servers=(tessera nethttp fasthttp beast)
# serving TYPE: sets `servers` to those that serve it (Beast: plaintext and json).
serving() {
  if [[ $1 == plaintext || $1 == json ]]; then servers=("${all_servers[@]}"); else servers=("${db_servers[@]}"); fi
}

# Every server answers every type it serves before anything is measured;
# the response sizes (headers and body) go beside the figures.
sizes="$work/sizes"
: >"$sizes"
for t in plaintext json db "queries?queries=20" fortunes "updates?queries=20"; do
  serving "${t%%\?*}"
  for s in "${servers[@]}"; do
    r=$(curl -s -o /dev/null -w '%{http_code} %{size_header} %{size_download}' "http://127.0.0.1:${port[$s]}/$t")
    read -r code hb bb <<<"$r"
    [ "$code" = 200 ] || { echo "tfbbench.sh: $s answered /$t with $code"; exit 1; }
    echo "$s ${t%%\?*} $((hb + bb))" >>"$sizes"
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
echo "server,type,queries,connections,run,requests_per_s,server_cpu_s,db_cpu_s,wrk_cpu_s,seconds,bytes" >"$csv"

# The points: type, queries (0: none), connections, the servers.
points=()
for t in plaintext json db fortunes; do
  for c in "${conns[@]}"; do points+=("$t 0 $c"); done
done
for t in queries updates; do
  for q in "${counts[@]}"; do points+=("$t $q 256"); done
done
runs=0
for p in "${points[@]}"; do
  read -r t _ _ <<<"$p"
  serving "$t"
  runs=$((runs + ${#servers[@]} * repeats))
done
echo "tfbbench: ${#points[@]} points, $runs runs of ${seconds} s (about $((runs * (seconds + 1) / 60 + 1)) min)"
n=0
for p in "${points[@]}"; do
  read -r t q c <<<"$p"
  serving "$t"
  path="/$t"; ((q > 0)) && path="/$t?queries=$q"
  # TechEmpower's request headers (its wrk command line).
  accept="application/json,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7"
  [[ $t == plaintext ]] && accept="text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7"
  headers=(-H "Host: tfb-server" -H "Accept: $accept" -H "Connection: keep-alive")
  # The first point of a type warms every server up on it (not recorded).
  if [[ $t != "${warmed:-}" ]]; then
    warmed=$t
    for s in "${servers[@]}"; do
      taskset -c 0 wrk -t1 -c64 -d1s "${headers[@]}" "http://127.0.0.1:${port[$s]}$path" >/dev/null
    done
  fi
  for ((rep = 0; rep < repeats; rep++)); do
    # A rotated order in each run: no server always goes first.
    for ((i = 0; i < ${#servers[@]}; i++)); do
      s=${servers[$(((i + rep) % ${#servers[@]}))]}
      n=$((n + 1))
      printf '\rtfbbench: %d/%d %-9s %-22s c=%-4d run %d ' "$n" "$runs" "$s" "$path" "$c" "$((rep + 1))" >&2
      pid_var="pid_$s"
      script=(); [ "$t" = plaintext ] && script=(-s "$work/pipeline.lua")
      s0=$(cpu "${!pid_var}"); d0=$(db_cpu)
      taskset -c 0 wrk -t1 -c"$c" -d"${seconds}s" --timeout 8 "${headers[@]}" "${script[@]}" \
        "http://127.0.0.1:${port[$s]}$path" >"$work/wrk.out" &
      wpid=$!
      w1=0
      while kill -0 "$wpid" 2>/dev/null; do w1=$(cpu "$wpid"); sleep 0.2; done
      wait "$wpid"
      s1=$(cpu "${!pid_var}"); d1=$(db_cpu)
      rps=$(awk '/Requests\/sec/ {print $2}' "$work/wrk.out")
      errs=$(awk '/Non-2xx|Socket errors/ {print}' "$work/wrk.out")
      # Any non-2xx answer or socket error: the run is failed, not throughput.
      if [ -n "$errs" ] || [ -z "$rps" ]; then
        echo -e "\ntfbbench: $s $path c=$c failed: ${errs:-no figure from wrk}" >&2
        rps=failed
      fi
      bytes=$(awk -v s="$s" -v t="$t" '$1 == s && $2 == t {print $3}' "$sizes")
      echo "$s,$t,$q,$c,$rep,$rps,$(echo "scale=2; ($s1-$s0)/$hz" | bc),$(echo "scale=2; ($d1-$d0)/$hz" | bc),$(echo "scale=2; $w1/$hz" | bc),$seconds,$bytes" >>"$csv"
    done
  done
done
echo >&2

# The tables of ratios, and the plot (requests/s per type at 256 connections).
bench/bench_tables.py tfbbench "$csv" "$work/plot.dat"
gnuplot -e "dat='$work/plot.dat'; png='out/tfbbench.png'" bench/plots/tfbbench.gp
echo "tfbbench: wrote $csv and out/tfbbench.png"
