#!/usr/bin/env bash
# Installs the Debian packages Tessera needs, only those that are missing.
# Safe to run repeatedly; needs root (or sudo) only when something is missing.
#   scripts/setup.sh [PACKAGE...]   # and these too (what a benchmark script adds)
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build pkg-config
  clang lld llvm clang-19 libc++1-19 libc++abi-19-dev
  libboost-context-dev libhwloc-dev liburing-dev libunwind-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev libcli11-dev
  libabsl-dev libboost-fiber-dev libtbb-dev libhttp-parser-dev
  gnuplot-nox spin gdb nlohmann-json3-dev
  libpq-dev postgresql libssl-dev openssl python3 curl libhiredis-dev redis-server
  "$@"
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
