#!/usr/bin/env bash
# The simulation (tessera/testing/simulation.h): runs and switches per
# second, and runs to find three bugs under random and pct schedules.
# Installs what is missing, builds Release, runs simbench (--quick unless
# arguments are given), and writes out/simbench.csv. Extra arguments go to
# simbench (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)" --target simbench
mkdir -p out
args=("$@")
((${#args[@]})) || args=(--quick)
build/release/bench/simbench --csv out/simbench.csv "${args[@]}"
