#!/usr/bin/env bash
# What the preload library costs a process that takes no sample, in what it loads and shows: it shows the
# program only the calls it interposes (exec*, fork, pthread_create, sigaction, signal, sigset); it loads
# neither libstdc++ nor libgcc_s (both linked in), libm, nor elfutils (libdw and libelf come on demand, when a
# process with samples symbolizes), nor libunwind and its liblzma (loaded by the set-up the drain thread makes
# after a pass that drained samples); and symbolizing a
# stripped distro binary does not load libdebuginfod (with curl, gnutls, krb5 …) unless DEBUGINFOD_URLS asks
# for it. A process whose samples need libunwind gets it once it has samples, and the program's C++ throw there
# still unwinds with libgcc_s (libunwind's _Unwind_RaiseException needs a free descriptor). The CPU it costs is
# measured in bench/bench_profile_cost.cpp (short_process).
# Usage: check_preload_footprint.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$(dirname "$0")/preload_helpers.sh"
src=$(cd "${2:?source dir}" && pwd)
preload_setup "${1:?build dir}"
skip_sanitized "the sanitized preload library cannot be LD_PRELOADed into cat and gzip"

# Exported: the interposed calls and nothing else (nm -D: defined, global).
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TWRDBV]$/ { print $3 }' | sed 's/@.*//' | sort -u | tr '\n' ' ')
expected="execl execle execlp execv execve execveat execvp execvpe fexecve fork pthread_create sigaction signal sigset "
[[ $exported == "$expected" ]] ||
  fail "the library exports $(wc -w <<< "$exported") symbols ($(cut -c1-300 <<< "$exported")…), expected only '$expected'"
for needed in libstdc++ libgcc_s libdw libelf libm.so libunwind liblzma; do
  readelf -d "$lib" | grep -q "NEEDED.*$needed" && fail "the library still needs $needed at load"
done
echo "ok: exports only the interposed calls; needs no libstdc++, libgcc_s, libdw, libelf, libm, libunwind, liblzma"

# A process without samples: cat prints its own mappings while profiled (at 1 Hz: no sample).
LD_PRELOAD=$lib SELFPERF_PROFILE="$tmp/cat.data" SELFPERF_FREQUENCY=1 SELFPERF_QUIET=1 cat /proc/self/maps > maps.txt
grep -q libselfperf_profile maps.txt || fail "cat's mappings lack the preload library: was it profiled?"
for loaded in libstdc++ libdw libelf libdebuginfod libunwind liblzma; do
  grep -q "$loaded" maps.txt && fail "a profiled cat that took no sample has $loaded mapped"
done
echo "ok: a profiled process without samples maps no libstdc++, elfutils or libunwind"

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

# A process whose samples need libunwind (a leaf without call-frame information): libunwind is loaded once it
# has samples and unwinds past the leaf; a throw afterwards binds libgcc_s's unwinder, and is caught with every
# descriptor taken.
cxx=${CXX:-c++}
command -v "$cxx" >/dev/null || { echo "skipped: no C++ compiler to build the libunwind check's program"; exit 77; }
"$cxx" -O2 -o late_throw "$src/tests/preload_late_throw.cpp" || fail "cannot build preload_late_throw.cpp"
(ulimit -n 1024 && LD_DEBUG=bindings LD_DEBUG_OUTPUT="$tmp/bindings" LD_PRELOAD=$lib SELFPERF_PROFILE="$tmp/late.data" \
  SELFPERF_FREQUENCY=999 SELFPERF_QUIET=1 ./late_throw > late.txt) || fail "late_throw under the profiler: $(cat late.txt)"
grep -q "^libunwind loaded" late.txt || fail "libunwind was not loaded in a process with samples: $(cat late.txt)"
grep -q "^caught" late.txt || fail "the throw was not caught: $(cat late.txt)"
grep -q ";spin_without_cfi " late.data.folded ||
  fail "no stack goes past the leaf without CFI (libunwind did not unwind): $(cut -c1-300 late.data.folded)"
raise=$(cat "$tmp"/bindings.* | grep "normal symbol \`_Unwind_RaiseException'" || true)
[[ -n $raise ]] || fail "ld.so showed no binding of _Unwind_RaiseException"
grep -v "to [^ ]*libgcc_s" <<< "$raise" && fail "_Unwind_RaiseException bound elsewhere than libgcc_s (above)"
echo "ok: libunwind loaded once samples came ($(awk '/;spin_without_cfi / { n += $NF } END { print n }' late.data.folded) samples past the leaf); throws bind libgcc_s's unwinder and need no descriptor"
