#!/usr/bin/env bash
# Tessera's jobs beside oneTBB, OpenMP and a std::thread pool, in one run, on
# 1 and 2 workers: the game frame (samples/job_system, p50/p99 frame time),
# parallel_for at three grains, fork-join fib and skynet, spawn latency from a
# plain thread, and the context-switch floor (bench/jobbench). Installs
# what is missing, builds Release, writes out/jobbench.csv, prints the ratios
# against oneTBB and draws out/jobbench.png.
#   scripts/jobbench.sh            # the full run (~3 minutes)
#   scripts/jobbench.sh --quick    # a smoke run: fib(25), fewer repetitions, 60 frames
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)" --target jobbench job_system
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

runs=("tessera 1" "tbb 1" "tessera 2" "tbb 2")
i=0
for run in "${runs[@]}"; do
  read -r backend w <<<"$run"
  i=$((i + 1))
  echo "[frame $i/${#runs[@]}] job_system --backend $backend --workers $w --frames $frames"
  line=$(build/release/samples/job_system --backend "$backend" --workers "$w" --frames "$frames" |
    sed -n 's/^frame time ms: p50 \([0-9.]*\) .* p99 \([0-9.]*\) .*/\1 \2/p')
  read -r p50 p99 <<<"$line"
  echo "  p50 $p50 ms, p99 $p99 ms"
  echo "frame-p50,$w,$backend,$p50,ms" >>out/jobbench.csv
  echo "frame-p99,$w,$backend,$p99,ms" >>out/jobbench.csv
done

bench/bench_tables.py jobbench out/jobbench.csv out/jobbench-ratios.dat

gnuplot -e "dat='out/jobbench-ratios.dat'; png='out/jobbench.png'" bench/plots/jobbench.gp
echo "CSV: out/jobbench.csv  plot: out/jobbench.png"
