#!/usr/bin/env bash
# Debian's libc++ headers for the `libcxx` preset, unpacked into DIR instead of
# installed. The package that installs them, libc++-19-dev, depends on LLVM's
# libunwind-19-dev, which Debian 12 declares in conflict with libunwind-dev: the
# libunwind whose header the library's backtraces are built with. The runtime
# libraries (libc++1-19, libc++abi1-19) and libc++abi's headers install
# normally (scripts/setup.sh); only these headers are kept beside the build.
#   scripts/libcxx.sh DIR    # DIR/usr/lib/llvm-19/include/c++/v1
set -euo pipefail
dir=${1:?usage: libcxx.sh DIR}
[ -f "$dir/usr/lib/llvm-19/include/c++/v1/__config_site" ] && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"  # apt's download user writes here
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if ! (cd "$tmp" && apt-get download -qq libc++-19-dev 2>/dev/null); then
  $SUDO apt-get update -qq
  (cd "$tmp" && apt-get download -qq libc++-19-dev)
fi
mkdir -p "$dir"
dpkg-deb -x "$tmp"/libc++-19-dev_*.deb "$dir"
echo "libcxx.sh: libc++ headers in $dir/usr/lib/llvm-19/include/c++/v1"
