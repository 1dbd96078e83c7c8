#!/usr/bin/env bash
# The production fast path (read_self / read_self_group: read_mmap_page with rdpmc and rdtsc) must be
# straight-line code: no call and no tail jump out of the function. Disassembles the out-of-line
# instantiations compiled into the library (sdk/src/counting/hw_read.cpp) and fails on any such instruction.
# On aarch64 (a native or a cross build) the same holds for the mrs reads of the PMU's counter registers.
# usage: check_fastpath_disasm.sh <build-dir> <source-dir>
set -euo pipefail
build=${1:?usage: check_fastpath_disasm.sh <build-dir> <source-dir>}

skip() { echo "skipped: $*"; exit 77; }

cache="$build/CMakeCache.txt"
[[ -f $cache ]] || { echo "FAIL: $build is not a CMake build directory"; exit 1; }
sanitize=$(sed -n 's/^SELFPERF_SANITIZE:[A-Z]*=//p' "$cache")
[[ -z $sanitize ]] || skip "sanitizer build ($sanitize) instruments memory accesses with calls"
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$cache")
[[ $build_type != Debug ]] || skip "Debug build does not inline"

lib=$(find "$build" -name libselfperf.a -print -quit)
[[ -n $lib ]] || { echo "FAIL: libselfperf.a not found under $build (build the selfperf target)"; exit 1; }

# The library's own architecture, so that an aarch64 cross build is checked on an x86-64 host too.
command -v readelf >/dev/null || skip "readelf (binutils) not installed"
machine=$(readelf -h "$lib" 2>/dev/null | sed -n "s/^ *Machine: *//p" | head -1)
case $machine in
  *X86-64*) arch=x86_64 objdump=objdump nm=nm ;;
  *AArch64*)
    arch=aarch64
    if [[ $(uname -m) == aarch64 ]]; then objdump=objdump nm=nm; else objdump=aarch64-linux-gnu-objdump nm=aarch64-linux-gnu-nm; fi ;;
  *) skip "no user-space counter read on this architecture (${machine:-unknown})" ;;
esac
command -v $objdump >/dev/null && command -v $nm >/dev/null || skip "$objdump/$nm (binutils) not installed"

symbols=$($nm --defined-only "$lib" 2>/dev/null || true)
status=0
for name in read_self_out_of_line read_self_group_out_of_line; do
  symbol=$(awk -v n="$name" '$2 == "T" && index($3, n) { print $3; exit }' <<<"$symbols")
  if [[ -z $symbol ]]; then
    echo "FAIL: $name not found in $lib"
    status=1
    continue
  fi
  # Instruction lines look like "  1b:	mov    (%rbx),%r8d".
  insns=$($objdump -d --no-show-raw-insn --disassemble="$symbol" "$lib" | grep -P '^\s+[0-9a-f]+:\t' || true)
  count=$(grep -c . <<<"$insns" || true)
  if [[ $arch == aarch64 ]]; then
    # bl/blr call; b/b.cond/cbz/tbz to another symbol is a tail call. br is the jump table that picks the
    # PMEVCNTR<n>_EL0 read (the register is encoded in the instruction): it stays inside the function.
    calls=$(grep -P '\t(bl|blr|blraa|blrab)\b' <<<"$insns" || true)
    tail_jumps=$(grep -P '\t(b|b\.[a-z]+|cbn?z|tbn?z)\s' <<<"$insns" | grep -v -F "<$symbol+" || true)
    has_rdpmc=$(grep -cP '\tmrs\s.*pmccntr_el0' <<<"$insns" || true)
  else
    calls=$(grep -P '\t(call|callq|lcall)\b' <<<"$insns" || true)
    # A jump is fine inside the function; one to another symbol is a tail call.
    tail_jumps=$(grep -P '\tj[a-z]*\s' <<<"$insns" | grep -v -F "<$symbol+" || true)
    has_rdpmc=$(grep -cP '\trdpmc' <<<"$insns" || true)
  fi
  echo "$name: $count instructions, rdpmc x$has_rdpmc ($(c++filt "$symbol"))"
  if [[ -n $calls || -n $tail_jumps ]]; then
    echo "FAIL: $name leaves the function:"
    printf '%s\n' "$calls" "$tail_jumps" | grep .
    status=1
  fi
  if [[ $has_rdpmc -eq 0 ]]; then
    echo "FAIL: $name contains no rdpmc: not the production instantiation"
    status=1
  fi
done
exit $status
