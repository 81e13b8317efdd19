#!/usr/bin/env bash
# Tessera's fibers beside Boost.Fiber: skynet, ping-pong, create+join, yield,
# semabench in fibers, memory per parked fiber. Installs what is missing, builds
# Release, runs fiberbench (--quick unless arguments are given) and writes
# out/fiberbench.csv. Extra arguments go to fiberbench (try --help).
#
# The memory figure parks 100,000 fibers, each with a guard-paged stack: two
# kernel mappings each, more than Linux's default vm.max_map_count (65530)
# allows. As root this script raises the limit to 262144 and says so; otherwise
# fiberbench reports the limit it hit.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)" --target fiberbench
mkdir -p out
limit=$(cat /proc/sys/vm/max_map_count 2>/dev/null || echo 0)
if ((limit < 262144)); then
  if [[ $(id -u) -eq 0 ]] && echo 262144 >/proc/sys/vm/max_map_count 2>/dev/null; then
    echo "fiberbench.sh: raised vm.max_map_count from $limit to 262144 for the memory figure"
  else
    echo "fiberbench.sh: vm.max_map_count is $limit; the memory figure may not fit (needs ~210000)"
  fi
fi
args=("$@")
((${#args[@]})) || args=(--quick)
build/release/bench/fiberbench --csv out/fiberbench.csv "${args[@]}"
