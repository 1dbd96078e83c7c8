#!/usr/bin/env bash
# What the preload library costs a process that takes no sample, in what it loads and shows: it shows the
# program only the calls it interposes (exec*, fork, pthread_create); it loads neither libstdc++ (linked in), libm,
# nor elfutils (libdw and libelf come on demand, when a process with samples symbolizes); and symbolizing a
# stripped distro binary does not load libdebuginfod (with curl, gnutls, krb5 …) unless DEBUGINFOD_URLS asks
# for it. The CPU it costs is measured in bench/bench_profile_cost.cpp (short_process).
# Usage: check_preload_footprint.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
lib="$build/lib/libselfperf_profile.so"
[[ -f $lib ]] || { echo "FAIL: build selfperf_profile first"; exit 1; }
if [[ ! -e /proc/sys/kernel/perf_event_paranoid ]]; then
  echo "skipped: this kernel has no perf events"; exit 77
fi
libs=$(ldd "$lib")
if [[ $libs == *libasan* || $libs == *libtsan* ]]; then
  echo "skipped: sanitizer build: the sanitized preload library cannot be LD_PRELOADed into cat and gzip"; exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fail() { echo "FAIL: $*"; exit 1; }

# Exported: the interposed calls and nothing else (nm -D: defined, global).
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TWRDBV]$/ { print $3 }' | sed 's/@.*//' | sort -u | tr '\n' ' ')
expected="execl execle execlp execv execve execveat execvp execvpe fexecve fork pthread_create "
[[ $exported == "$expected" ]] ||
  fail "the library exports $(wc -w <<< "$exported") symbols ($(cut -c1-300 <<< "$exported")…), expected only '$expected'"
for needed in libstdc++ libdw libelf libm.so; do
  readelf -d "$lib" | grep -q "NEEDED.*$needed" && fail "the library still needs $needed at load"
done
echo "ok: exports only the interposed calls; needs no libstdc++, libdw, libelf, libm"

# A process without samples: cat prints its own mappings while profiled (at 1 Hz: no sample).
LD_PRELOAD=$lib SELFPERF_PROFILE="$tmp/cat.data" SELFPERF_FREQUENCY=1 SELFPERF_QUIET=1 cat /proc/self/maps > maps.txt
grep -q libselfperf_profile maps.txt || fail "cat's mappings lack the preload library: was it profiled?"
for loaded in libstdc++ libdw libelf libdebuginfod; do
  grep -q "$loaded" maps.txt && fail "a profiled cat that took no sample has $loaded mapped"
done
echo "ok: a profiled process without samples maps no libstdc++ or elfutils"

# A stripped distro binary with samples: libdw is loaded to name its frames, libdebuginfod is not.
command -v gzip >/dev/null || { echo "skipped: no gzip"; exit 77; }
head -c 4000000 /dev/urandom > input
env -u DEBUGINFOD_URLS LD_DEBUG=files LD_PRELOAD=$lib SELFPERF_PROFILE="$tmp/gzip.data" SELFPERF_FREQUENCY=2000 \
  SELFPERF_QUIET=1 gzip -9 -c input > /dev/null 2> ld.log
[[ -s gzip.data && -s gzip.data.folded ]] || fail "gzip's profile not written"
grep -q "file=libdw.so.1.*dynamically loaded" ld.log || fail "libdw was not loaded on demand (ld.so: $(grep -c . ld.log) lines)"
grep -q "libdebuginfod" ld.log && fail "symbolizing gzip loaded libdebuginfod without DEBUGINFOD_URLS"
grep -q "gzip" gzip.data.folded || fail "gzip's folded stacks do not name gzip: $(head -c 300 gzip.data.folded)"
echo "ok: gzip profiled ($(awk '{ n += $NF } END { print n }' gzip.data.folded) samples): libdw loaded on demand, no libdebuginfod"
