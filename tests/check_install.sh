#!/usr/bin/env bash
# `cmake --install` then a consumer project using find_package(selfperf) builds and counts an event.
set -euo pipefail
build=$1
if [ ! -w "$build" ]; then
  echo "skipped: cmake --install writes install_manifest.txt into the build dir, which this user cannot write"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
test -f "$work/prefix/include/selfperf/selfperf.hpp"
test -f "$work/prefix/lib/libselfperf.a" || test -f "$work/prefix/lib64/libselfperf.a"
mkdir "$work/app"
cat > "$work/app/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(consumer CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(selfperf REQUIRED)
add_executable(consumer main.cpp)
target_link_libraries(consumer PRIVATE selfperf::selfperf selfperf::thread_hook)
CM
cat > "$work/app/main.cpp" <<'CPP'
#include <selfperf/selfperf.hpp>
#include <cstdio>
#include <thread>
int main() {
  selfperf::CounterGroup group{"task-clock"};
  group.enable();
  volatile double x = 0;
  for (int i = 0; i < 1000000; ++i) x = x + i;
  auto r = group.read();
  std::printf("task-clock %llu\n", static_cast<unsigned long long>(r[0].value));
  // selfperf::thread_hook: a thread started after start() is attached by itself.
  selfperf::Sampler::Options o;
  o.event = "cpu-clock";
  o.frequency = 100;
  o.attach_new_threads = true;
  selfperf::Sampler sampler(o);
  sampler.start();
  std::thread([] {}).join();
  auto totals = sampler.stop();
  std::printf("threads attached %zu\n", totals.threads.size());
  return r[0].value > 0 && totals.threads.size() == 1 && totals.attach_failed == 0 ? 0 : 1;
}
CPP
# Sanitizer builds need the same runtime in the consumer.
san=$(sed -n 's/^SELFPERF_SANITIZE:STRING=//p' "$build/CMakeCache.txt")
flags=${san:+fsanitize=$san}
cmake -S "$work/app" -B "$work/app/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
  ${flags:+-DCMAKE_CXX_FLAGS=-$flags -DCMAKE_EXE_LINKER_FLAGS=-$flags} >/dev/null
cmake --build "$work/app/build" >/dev/null
"$work/app/build/consumer"
echo "find_package(selfperf) consumer built and ran"
