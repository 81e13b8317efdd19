#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite with ctest.
#   scripts/test.sh                 # Release build + tests
#   scripts/test.sh release asan    # several presets in turn (release, debug, asan, tsan)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
presets=("$@")
((${#presets[@]})) || presets=(release)
jobs=$(nproc)
for p in "${presets[@]}"; do
  echo "=== preset: $p ==="
  # libc++'s headers are unpacked beside the build, not installed (libcxx.sh says why).
  if [ "$p" = libcxx ]; then scripts/libcxx.sh build/libcxx-root; fi
  cmake --preset "$p"
  cmake --build --preset "$p" -j "$jobs"
  ctest --preset "$p" -j "$jobs"
done
