#!/usr/bin/env bash
# Cross-builds the emulated guest's binaries into <dir>/guest-bin with Debian's aarch64 toolchain and -Werror.
#   build_guest_tests.sh <dir> "<guest programs>" "<library programs>" "<guest scripts>" "<support targets>"
#                        "<support files>"
# guest programs:   tests/emulated/<name>.cpp, self-contained (no selfperf code), compiled directly
# library programs: targets of the selfperf tree (tests/hw_*.cpp), built in <dir>/cross with
#                   cmake/aarch64-linux-gnu.cmake against an arm64 sysroot of unpacked Debian packages
#                   (tests/emulated/make_sysroot.sh, into <dir>/sysroot, which the guest's libraries come from too)
# guest scripts:    tests/emulated/<name>.sh, run by the guest's busybox sh
# support targets:  targets of the tree the scripts run (samples, the preload library, the tools), built with
#                   the library programs; the support files they make go to <dir>/guest-bin/support
set -euo pipefail
dir=$(mkdir -p "$1" && cd "$1" && pwd)
read -r -a guest_programs <<<"${2:-}"
read -r -a library_programs <<<"${3:-}"
read -r -a guest_scripts <<<"${4:-}"
read -r -a support_targets <<<"${5:-}"
read -r -a support_files <<<"${6:-}"
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
fail() { echo "build_guest_tests: $*" >&2; exit 1; }

command -v aarch64-linux-gnu-g++ >/dev/null ||
  fail "aarch64-linux-gnu-g++ not found: install g++-aarch64-linux-gnu (./setup.sh emulated does)"
rm -rf "$dir/guest-bin"
missing=()
mkdir -p "$dir/guest-bin"

for name in "${guest_programs[@]}"; do
  echo "== aarch64-linux-gnu-g++ $name"
  aarch64-linux-gnu-g++ -std=c++20 -O2 -g -Wall -Wextra -Werror -o "$dir/guest-bin/$name" "$here/$name.cpp"
done

for name in "${guest_scripts[@]}"; do
  install -m 755 "$here/$name.sh" "$dir/guest-bin/$name"
done

if [ ${#library_programs[@]} -gt 0 ]; then
  jobs=$(nproc)
  bash "$here/make_sysroot.sh" "$dir/sysroot"
  # Only the targets the guest runs: the whole tree would take most of CI's budget on 2 cores.
  cmake -S "$source_dir" -B "$dir/cross" -DCMAKE_TOOLCHAIN_FILE="$source_dir/cmake/aarch64-linux-gnu.cmake" \
    -DSELFPERF_AARCH64_SYSROOT="$dir/sysroot" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSELFPERF_WERROR=ON \
    -DSELFPERF_BUILD_BENCH=OFF -DSELFPERF_BUILD_SAMPLES=ON >/dev/null
  echo "== cross-building ${library_programs[*]} ${support_targets[*]}"
  # A program that fails to build now must not be replaced by one from an earlier build.
  for name in "${library_programs[@]}" "${support_files[@]}"; do find "$dir/cross" -name "$name" -type f -delete; done
  # -k: one program that does not build must not keep the others out of the guest; this script still fails.
  cmake --build "$dir/cross" -j"$jobs" --target "${library_programs[@]}" "${support_targets[@]}" -- -k || true
  for name in "${library_programs[@]}"; do
    binary=$(find "$dir/cross" -name "$name" -type f -perm -u+x | head -1)
    if [ -n "$binary" ]; then cp "$binary" "$dir/guest-bin/$name"; else missing+=("$name"); fi
  done
  mkdir -p "$dir/guest-bin/support"
  for name in "${support_files[@]}"; do
    file=$(find "$dir/cross" -name "$name" -type f -perm -u+x | head -1)
    if [ -n "$file" ]; then cp "$file" "$dir/guest-bin/support/$name"; else missing+=("$name"); fi
  done
fi
echo "== guest binaries: $(ls "$dir/guest-bin" | tr '\n' ' ')"
[ ${#missing[@]} -eq 0 ] || fail "the cross build made no ${missing[*]} (see the compiler's errors above)"
