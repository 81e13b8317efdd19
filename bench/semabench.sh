#!/usr/bin/env bash
# The main job: installs what is missing, builds Release, and runs semabench in
# quick mode (about one minute): a table with ratios to sem_t, out/semabench.csv
# and the plot out/semabench.png (bench/plots/semabench.gp). Extra arguments go
# to semabench (try --help).
# Then semabench's fiber mode and the other fiber figures beside Boost.Fiber
# (bench/fiberbench.sh --quick, under a minute): out/fiberbench.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)" --target semabench
mkdir -p out
args=("$@")
((${#args[@]})) || args=(--quick)
build/release/bench/semabench --csv out/semabench.csv "${args[@]}"
gnuplot -e "csv='out/semabench.csv'; png='out/semabench.png'" bench/plots/semabench.gp
echo "Plot: out/semabench.png"
bench/fiberbench.sh --quick
