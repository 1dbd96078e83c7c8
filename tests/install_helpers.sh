# Sourced by the install and packaging checks (tests/check_install.sh, check_pkgconfig.sh, check_deb.sh).
# Not a test itself: ctest runs check_*.sh only.

skip() { echo "skipped: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# As root, run the calling script again as nobody when nobody can reach the build dir: the point of these
# checks is that an ordinary user can install and use the package. cmake --install writes one file outside
# DESTDIR, <build>/install_manifest.txt, in a dir nobody cannot write; it gets that one file, made here.
# Usage: as_ordinary_user "$0" "$@"   (SELFPERF_TEST_AS_ROOT=1 keeps root, e.g. to debug a failure)
as_ordinary_user() {
  local script=$1 build=$2
  [ "$(id -u)" -eq 0 ] || return 0
  [ "${SELFPERF_TEST_AS_ROOT:-}" = 1 ] && return 0
  if ! setpriv --reuid=65534 --regid=65534 --clear-groups test -r "$build/cmake_install.cmake" -a -r "$script"; then
    echo "note: nobody cannot reach $build, so this runs as root"
    return 0
  fi
  touch "$build/install_manifest.txt" && chown 65534:65534 "$build/install_manifest.txt"
  echo "note: running as nobody"
  exec setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/tmp bash "$script" "${@:2}"
}

# stage_install <build> <destdir> <prefix>: DESTDIR=<destdir> cmake --install <build> --prefix <prefix>.
# Where the build dir and its manifest are not writable (the suite's unprivileged pass), the same install
# script runs with its manifest written to <destdir>/.. instead: the rules installed are the same.
stage_install() {
  local build=$1 destdir=$2 prefix=$3 manifest=$1/install_manifest.txt
  if [ -w "$manifest" ] || { [ ! -e "$manifest" ] && [ -w "$build" ]; }; then
    DESTDIR=$destdir cmake --install "$build" --prefix "$prefix" >/dev/null
  else
    local script
    script=$(dirname "$destdir")/cmake_install.cmake
    mkdir -p "$(dirname "$destdir")"
    sed "s|file(WRITE \"$build/|file(WRITE \"$(dirname "$destdir")/|" "$build/cmake_install.cmake" > "$script"
    grep -q "file(WRITE \"$build/" "$script" && fail "could not move the install manifest out of $build"
    DESTDIR=$destdir cmake -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_CONFIG_NAME="$(build_type "$build")" \
      -P "$script" >/dev/null
  fi
}

build_type() { sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$1/CMakeCache.txt"; }

# Sanitizer builds: the consumer needs the same runtime. Prints e.g. -fsanitize=thread, or nothing.
sanitize_flags() {
  local san
  san=$(sed -n 's/^SELFPERF_SANITIZE:STRING=//p' "$1/CMakeCache.txt")
  [ -z "$san" ] || echo "-fsanitize=$san"
}

# The consumer program: counts an event, and attaches a thread started while sampling (selfperf::thread_hook).
write_consumer_main() {
  cat > "$1" <<'CPP'
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
}

# A Google Benchmark program with selfperf counters: passes when the counter reached the JSON output.
write_benchmark_main() {
  cat > "$1" <<'CPP'
#include <selfperf/benchmark.hpp>
static void BM_sum(benchmark::State& state) {
  selfperf::BenchmarkCounters counters(state, {"task-clock:u"});
  for (auto _ : state) {
    long s = 0;
    for (long i = 0; i < 1000; ++i) benchmark::DoNotOptimize(s += i);
  }
}
BENCHMARK(BM_sum)->Iterations(1000);
BENCHMARK_MAIN();
CPP
}
