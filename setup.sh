#!/usr/bin/env bash
# selfperf set-up: installs what is missing (Debian 12, as root), builds, and runs the demo or the tests.
#   ./setup.sh demo    install, build, run the main demo
#   ./setup.sh test    install, build plain + ASan/UBSan + TSan with -Werror, run every test (also as nobody),
#                      build with Clang and run the fuzzers briefly,
#                      then compile the Release benchmarks
#   ./setup.sh bench   install, build, run the benchmarks (ratios printed)
#   ./setup.sh emulated  install, cross-build for arm64, boot an emulated arm64 machine (QEMU, Debian's kernel,
#                      its PMU driver) and run the hardware tests in it as root and as nobody (build-emu/)
set -euo pipefail
cd "$(dirname "$0")"
mode=${1:-demo}
jobs=$(nproc)

packages=(build-essential cmake pkg-config binutils doctest-dev libbenchmark-dev nlohmann-json3-dev libunwind-dev libdw-dev libelf-dev zlib1g-dev
          linux-perf util-linux python3)
# golang-go: go tool pprof reads our profiles in a test; clang + libclang-rt-14-dev: the Clang build and libFuzzer.
[ "$mode" = test ] && packages+=(chromium golang-go clang libclang-rt-14-dev)
# libgoogle-perftools4: bench_sampler runs gperftools' CPU profiler beside ours on the same workload.
[ "$mode" = bench ] && packages+=(libgoogle-perftools4)
# default-jdk-headless + libhdrhistogram-java: HdrHistogram's own outputPercentileDistribution checks our .hgrm text.
[ "$mode" = test ] && packages+=(default-jdk-headless libhdrhistogram-java)
# The emulated arm64 machine: QEMU, the cross toolchain, cpio for the initramfs. Its kernel, busybox and arm64
# libraries are downloaded from the Debian archive into build-emu/ (apt-get download), never installed.
emulated_packages=(qemu-system-arm g++-aarch64-linux-gnu cpio)
if [ "$mode" = test ] || [ "$mode" = emulated ]; then packages+=("${emulated_packages[@]}"); fi

install_missing() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "== installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# apt-get download of the guest's arm64 packages needs apt to know the architecture (nothing arm64 is installed).
add_arm64_architecture() {
  dpkg --print-foreign-architectures | grep -qx arm64 && return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "== adding the arm64 architecture to apt (for apt-get download of the emulated machine's packages)"
  $sudo dpkg --add-architecture arm64
  $sudo apt-get update -qq
}

# The emulated arm64 machine's ctest project (tests/emulated): cross build, boot, one result a guest run.
run_emulated() {
  cmake -S tests/emulated -B build-emu >/dev/null
  (cd build-emu && ctest --output-on-failure)
}

# The unprivileged pass needs `nobody` to reach the tree: open o+x on ancestors that lack it (e.g. /root)
# for the duration of that pass only.
opened_dirs=()
open_path_for_nobody() {
  local dir=$PWD
  while [ "$dir" != / ]; do
    if [ $((0$(stat -c %a "$dir") & 1)) -eq 0 ]; then  # this directory itself lacks o+x
      chmod o+x "$dir" && opened_dirs+=("$dir")
    fi
    dir=$(dirname "$dir")
  done
  [ ${#opened_dirs[@]} -eq 0 ] || echo "== opened o+x for the unprivileged run: ${opened_dirs[*]}"
}
close_path_for_nobody() {
  local d
  for d in "${opened_dirs[@]}"; do chmod o-x "$d"; done
  opened_dirs=()
}

build() {  # build <dir> [cmake args…]
  local dir=$1; shift
  cmake -S . -B "$dir" -DSELFPERF_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
}

# The benchmarks build on their own, in Release (no tests), leaving build/ as the tests configured it. -O3 warns
# where -O2 does not, so `test` compiles this build too (without running it).
build_bench() { build build-bench -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DSELFPERF_BUILD_SAMPLES=OFF; }

if [ "$mode" = test ] || [ "$mode" = emulated ]; then add_arm64_architecture; fi
install_missing
case "$mode" in
  demo)
    build build-demo -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF -DSELFPERF_BUILD_BENCH=OFF
    for program in capabilities hot_loop profile_me; do
      [ -x build-demo/samples/$program ] || continue
      echo; echo "== build-demo/samples/$program"
      (cd build-demo && ./samples/$program)
    done
    ;;
  test)
    build build-asan -DCMAKE_BUILD_TYPE=Debug -DSELFPERF_SANITIZE=address,undefined -DSELFPERF_BUILD_BENCH=OFF
    (cd build-asan && ctest -j"$jobs" --output-on-failure)
    build build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSELFPERF_SANITIZE=thread -DSELFPERF_BUILD_BENCH=OFF
    (cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest -j"$jobs" --output-on-failure)
    build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
    # Most users are not root: the whole suite again as nobody (perf_event_paranoid applies to them).
    mkdir -p build/Testing/Temporary && chmod -R a+rwX build/Testing
    open_path_for_nobody
    trap close_path_for_nobody EXIT
    (cd build && setpriv --reuid=65534 --regid=65534 --clear-groups ctest -j"$jobs" --output-on-failure)
    close_path_for_nobody
    # Hardware-only tests: show what they said (on a VM: "skipped: no hardware PMU").
    (cd build && ctest -L hardware -V 2>&1 | grep -E "^[0-9]+: (skipped|\[doctest\] test cases)" || true)
    (cd build && ctest -j"$jobs" --output-on-failure)
    # Clang (-Werror) builds the whole tree too, with the libFuzzer targets, which run briefly (docs/fuzzing.md).
    build build-clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSELFPERF_FUZZ=ON \
      -DSELFPERF_BUILD_BENCH=OFF
    (cd build-clang && ctest -j"$jobs" -L fuzz --output-on-failure)
    build_bench
    # The hardware tests for real: on the emulated arm64 machine's PMU.
    run_emulated
    ;;
  emulated)
    run_emulated
    ;;
  bench)
    build_bench
    for b in build-bench/bench/bench_*; do echo "== $b"; "$b"; done
    ;;
  *) echo "usage: $0 demo|test|bench|emulated" >&2; exit 2 ;;
esac
