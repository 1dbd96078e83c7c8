#!/usr/bin/env bash
# cross_build.sh [BUILD_DIR [cmake args…]]: the aarch64 build (library, tests, samples, doctor, preload library)
# with Debian's cross toolchain and -Werror, its arm64 libraries unpacked into BUILD_DIR/sysroot.
# Default BUILD_DIR: build-arm64. Needs g++-aarch64-linux-gnu on the host.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-arm64}
[ $# -gt 0 ] && shift
command -v aarch64-linux-gnu-g++ >/dev/null ||
  { echo "cross_build: aarch64-linux-gnu-g++ missing (apt-get install g++-aarch64-linux-gnu)" >&2; exit 1; }
mkdir -p "$build"
build=$(cd "$build" && pwd)
tests/emulated/make_sysroot.sh "$build/sysroot"
cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" \
  -DSELFPERF_AARCH64_SYSROOT="$build/sysroot" -DSELFPERF_WERROR=ON -DSELFPERF_BUILD_BENCH=OFF "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
