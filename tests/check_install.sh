#!/usr/bin/env bash
# A relocatable install, as an ordinary user: DESTDIR=… cmake --install puts every file under DESTDIR/prefix,
# the staged tree is moved elsewhere, and consumers find the moved copy with find_package (CMAKE_PREFIX_PATH):
# the core with Google Benchmark unavailable, and COMPONENTS benchmark with it.
set -euo pipefail
build=$1 src=$2
. "$(dirname "$0")/install_helpers.sh"
as_ordinary_user "$0" "$@"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=/opt/selfperf

stage_install "$build" "$work/stage/root" "$prefix"
stage=$work/stage/root
outside=$(cd "$stage" && find . -mindepth 1 ! -path ./opt ! -path ./opt/selfperf ! -path './opt/selfperf/*')
[ -z "$outside" ] || fail "installed outside the prefix $prefix: $outside"
test -f "$stage$prefix/include/selfperf/selfperf.hpp"
mv "$stage$prefix" "$work/moved"
rm -rf "$work/stage"
# The package must not remember where it was built or first installed.
if grep -rlF -e "$build" -e "$src" -e "$prefix" "$work/moved"/lib*/cmake "$work/moved"/lib*/pkgconfig; then
  fail "absolute build, source or install paths in the exported package files above"
fi

flags=$(sanitize_flags "$build")
configure() {  # configure <dir> [cmake args…]
  cmake -S "$1" -B "$1/build" -DCMAKE_PREFIX_PATH="$work/moved" -DCMAKE_BUILD_TYPE="$(build_type "$build")" \
    ${flags:+"-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=$flags"} "${@:2}"
}

# The core, where Google Benchmark cannot be found.
mkdir "$work/core"
cat > "$work/core/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(consumer CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(selfperf 0.1 REQUIRED)
if(TARGET selfperf::benchmark)
  message(FATAL_ERROR "selfperf::benchmark defined without COMPONENTS benchmark")
endif()
add_executable(consumer main.cpp)
target_link_libraries(consumer PRIVATE selfperf::selfperf selfperf::thread_hook)
CM
write_consumer_main "$work/core/main.cpp"
configure "$work/core" -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON > "$work/core.log" 2>&1 \
  || { cat "$work/core.log"; fail "find_package(selfperf) needs more than the core"; }
cmake --build "$work/core/build" >/dev/null
"$work/core/build/consumer"

# COMPONENTS benchmark: selfperf::benchmark, and a clear message where Google Benchmark is missing.
if ! compgen -G "$work/moved/lib*/cmake/selfperf/selfperfBenchmarkTargets.cmake" >/dev/null; then
  echo "find_package(selfperf) consumer built and ran; no selfperf::benchmark in this build (no Google Benchmark)"
  exit 0
fi
mkdir "$work/bench"
cat > "$work/bench/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(consumer CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(selfperf REQUIRED COMPONENTS benchmark)
add_executable(bench main.cpp)
target_link_libraries(bench PRIVATE selfperf::benchmark)
CM
write_benchmark_main "$work/bench/main.cpp"
if configure "$work/bench" -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON > "$work/nobench.log" 2>&1; then
  fail "COMPONENTS benchmark was found although Google Benchmark was not"
fi
grep -q "libbenchmark-dev" "$work/nobench.log" || { cat "$work/nobench.log"; fail "no remedy named"; }
rm -rf "$work/bench/build"
configure "$work/bench" > "$work/bench.log" 2>&1 || { cat "$work/bench.log"; fail "COMPONENTS benchmark"; }
cmake --build "$work/bench/build" >/dev/null
"$work/bench/build/bench" --benchmark_format=json > "$work/bench.json"
grep -q 'task-clock' "$work/bench.json" || { cat "$work/bench.json"; fail "no task-clock counter in the output"; }
echo "moved install: find_package(selfperf) and find_package(selfperf COMPONENTS benchmark) consumers built and ran"
