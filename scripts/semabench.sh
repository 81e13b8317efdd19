#!/usr/bin/env bash
# The main job: installs what is missing, builds Release, and runs semabench in
# quick mode (about one minute): a table with ratios to sem_t, out/semabench.csv
# and the plot out/semabench.png. Extra arguments go to semabench (try --help).
# Then semabench's fiber mode and the other fiber figures beside Boost.Fiber
# (scripts/fiberbench.sh --quick, under a minute): out/fiberbench.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)" --target semabench
mkdir -p out
args=("$@")
((${#args[@]})) || args=(--quick)
build/release/samples/semabench --csv out/semabench.csv --plot out/semabench.png "${args[@]}"
scripts/fiberbench.sh --quick
