#!/usr/bin/env bash
# Channels side by side: tessera::lockfree_channel, tessera::channel (spin
# lock) and select, beside Boost.Fiber's channels and Go's (bench/peers/chan,
# GOMAXPROCS=2), as OS threads (P = 1..16) and as fibers on two workers.
# Installs what is missing (golang-go, gnuplot, the build deps), builds
# Release, runs chanbench (--quick unless arguments are given), and writes
# out/chanbench.csv and out/chanbench.png. Extra arguments go to chanbench
# (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh golang-go gnuplot-nox
cmake --preset release
cmake --build --preset release -j "$(nproc)" --target chanbench
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd bench/peers/chan && GOCACHE="$work/gocache" GO111MODULE=off go build -o "$work/chan" chan.go)
mkdir -p out
args=("$@")
((${#args[@]})) || args=(--quick)
build/release/bench/chanbench --go "$work/chan" --csv out/chanbench.csv "${args[@]}"
# The plot's panels are the threads and fibers rows (--only select has none).
if grep -qE '^(threads|fibers),' out/chanbench.csv; then
  gnuplot -e "csv='out/chanbench.csv'; png='out/chanbench.png'" bench/plots/chanbench.gp
  echo "Plot: out/chanbench.png"
else
  echo "No plot: no threads or fibers rows in this run"
fi
