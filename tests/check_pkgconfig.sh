#!/usr/bin/env bash
# pkg-config, as an ordinary user, on a moved install: a plain Makefile consumer builds with
# $(shell pkg-config --cflags --libs selfperf) (and selfperf-benchmark) and runs; the plain g++ link line of
# docs/install.md links too.
set -euo pipefail
build=$1
. "$(dirname "$0")/install_helpers.sh"
as_ordinary_user "$0" "$@"
command -v pkg-config >/dev/null || skip "no pkg-config (Debian: apt-get install pkg-config)"
command -v make >/dev/null || skip "no make"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

stage_install "$build" "$work/stage/root" /usr/local
mv "$work/stage/root/usr/local" "$work/moved"
prefix=$work/moved
export PKG_CONFIG_PATH=$(echo "$prefix"/lib*/pkgconfig)
pkg-config --exists --print-errors selfperf
libs=$(pkg-config --libs selfperf)
for lib in -lselfperf -lgcc_s -ldw -lelf -lunwind -pthread; do
  [[ " $libs " == *" $lib "* ]] || fail "pkg-config --libs selfperf lacks $lib: $libs"
done
[[ "$(pkg-config --cflags selfperf)" == *"-I$prefix/"* ]] || fail "--cflags does not point into the moved tree"
hook=$(pkg-config --variable=thread_hook selfperf)
test -f "$hook" || fail "thread_hook=$hook: no such file"

have_bench=0
pkg-config --exists selfperf-benchmark && have_bench=1
mkdir "$work/app"
write_consumer_main "$work/app/main.cpp"
write_benchmark_main "$work/app/bench.cpp"
# Recipes start with a tab.
sed 's/^>/\t/' > "$work/app/Makefile" <<'MK'
CXXFLAGS += -std=c++20 $(SAN) $(shell pkg-config --cflags selfperf)
LDFLAGS += $(SAN)
LDLIBS += $(shell pkg-config --libs selfperf)
THREAD_HOOK := $(shell pkg-config --variable=thread_hook selfperf)

consumer: main.o
>$(CXX) $(LDFLAGS) -o $@ $< $(THREAD_HOOK) $(LDLIBS)

bench.o: CXXFLAGS += $(shell pkg-config --cflags selfperf-benchmark)
bench: bench.o
>$(CXX) $(LDFLAGS) -o $@ $< $(shell pkg-config --libs selfperf-benchmark)
MK
san=$(sanitize_flags "$build")
targets=(consumer)
[ $have_bench = 1 ] && targets+=(bench)
make -s -C "$work/app" SAN="$san" "${targets[@]}"
"$work/app/consumer"
if [ $have_bench = 1 ]; then
  "$work/app/bench" --benchmark_format=json > "$work/bench.json"
  grep -q 'task-clock' "$work/bench.json" || { cat "$work/bench.json"; fail "no task-clock counter in the output"; }
fi

# docs/install.md's plain g++ line, less the compile step done above.
libdir=$(echo "$prefix"/lib*/libselfperf.a); libdir=${libdir%/*}
g++ $san "$work/app/main.o" "$hook" -o "$work/app/plain" -L"$libdir" -lselfperf -lgcc_s -ldw -lelf -lunwind -pthread -ldl
"$work/app/plain" > /dev/null
echo "pkg-config Makefile consumer (bench: $have_bench) and the plain g++ link line built and ran"
