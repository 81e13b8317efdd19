#!/usr/bin/env bash
# Tessera's jobs beside oneTBB, OpenMP and a std::thread pool, in one run, on
# 1 and 2 workers: the game frame (samples/job_system, and bench/jobbench/frame_tbb
# for oneTBB: p50/p99 frame time),
# parallel_for at three grains, fork-join fib and skynet, spawn latency from a
# plain thread, and the context-switch floor (bench/jobbench). Installs
# what is missing, builds Release, writes out/jobbench.csv, prints the ratios
# against oneTBB and draws out/jobbench.png.
#   bench/jobbench.sh            # the full run (~2 minutes)
#   bench/jobbench.sh --quick    # a smoke run: fib(25), fewer repetitions, 60 frames
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)" --target jobbench job_system frame_tbb
mkdir -p out
quick=0
[[ ${1:-} == --quick ]] && quick=1
frames=300
jb_args=()
if ((quick)); then
  frames=60
  jb_args=(--quick)
fi

build/release/bench/jobbench "${jb_args[@]}" --csv out/jobbench.csv

# The game frame: each backend's frame percentiles, the median over `rounds`
# runs of a fresh process. The backends alternate, and which goes first
# swaps every round: the host's slow stretches (the first run after a busy
# phase is often the slow one) then land on both alike.
rounds=3
((quick)) && rounds=1
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
total=$((2 * 2 * rounds))
i=0
for w in 1 2; do
  declare -A p50s=() p99s=()
  for ((r = 0; r < rounds; r++)); do
    order=(tessera tbb)
    ((r % 2)) && order=(tbb tessera)
    for backend in "${order[@]}"; do
      i=$((i + 1))
      prog=build/release/samples/job_system
      [[ $backend == tbb ]] && prog=build/release/bench/frame_tbb
      echo "[frame $i/$total] $(basename "$prog") --workers $w --frames $frames"
      line=$("$prog" --workers "$w" --frames "$frames" |
        sed -n 's/^frame time ms: p50 \([0-9.]*\) .* p99 \([0-9.]*\) .*/\1 \2/p')
      read -r p50 p99 <<<"$line"
      echo "  p50 $p50 ms, p99 $p99 ms"
      p50s[$backend]+="$p50 "
      p99s[$backend]+="$p99 "
    done
  done
  for backend in tessera tbb; do
    # shellcheck disable=SC2086  # the lists split into one value per run
    echo "frame-p50,$w,$backend,$(median ${p50s[$backend]}),ms" >>out/jobbench.csv
    # shellcheck disable=SC2086
    echo "frame-p99,$w,$backend,$(median ${p99s[$backend]}),ms" >>out/jobbench.csv
  done
  unset p50s p99s
done

bench/bench_tables.py jobbench out/jobbench.csv out/jobbench-ratios.dat

gnuplot -e "dat='out/jobbench-ratios.dat'; png='out/jobbench.png'" bench/plots/jobbench.gp
echo "CSV: out/jobbench.csv  plot: out/jobbench.png"
