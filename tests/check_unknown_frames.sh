#!/usr/bin/env bash
# Frames of a stripped program we did not build (Debian's gzip) are named one box per function, as perf sees
# them: where perf script says "4330 [unknown] (/usr/bin/gzip)", our folded stacks say gzip+0x<start of the
# FDE around 0x4330> (the same ELF address space perf prints), or [gzip] where no FDE covers the address
# (stackcollapse-perf's name). Checked on perf record's file read by `selfperf report`, and on the profile
# `selfperf record` writes, each against perf script's reading of the same file.
# Usage: check_unknown_frames.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(realpath "${1:?build dir}")
selfperf=$build/bin/selfperf
[[ -x $selfperf ]] || { echo "FAIL: build the selfperf tool first"; exit 1; }
gzip=$(command -v gzip) || { echo "skipped: gzip is not installed"; exit 77; }
gzip=$(realpath "$gzip")
command -v readelf > /dev/null || { echo "skipped: readelf (binutils) is not installed"; exit 77; }
command -v python3 > /dev/null || { echo "skipped: python3 is not installed"; exit 77; }
command -v perf > /dev/null || { echo "skipped: perf is not installed (apt-get install linux-perf)"; exit 77; }
if readelf -SW "$gzip" | grep -q '\.symtab'; then echo "skipped: $gzip is not stripped"; exit 77; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export HOME=$work
fail() { echo "FAIL: $*"; exit 1; }

readelf --debug-dump=frames "$gzip" 2> /dev/null | grep -o 'pc=[0-9a-f]*\.\.[0-9a-f]*' > fdes.txt || true
[[ -s fdes.txt ]] || { echo "skipped: $gzip has no .eh_frame FDEs"; exit 77; }
# The PLT sections: perf names a stub there from the relocations ("write@plt"), we by its FDE like any code
# without a symbol (docs/frame-names.md). Samples in them are left out of the comparison on both sides.
readelf -SW "$gzip" | sed 's/^ *\[ *[0-9]*\]//' | awk '$1 ~ /^\.plt/ && $2 == "PROGBITS" { print $3, $5 }' > plt.txt
# Text that takes gzip -6 about a second, so that a few hundred samples land in its functions.
seq 1 1500000 | sed 's/$/ lorem ipsum dolor sit amet 0123456789/' > in.txt

# compare.py FOLDED PERF_SCRIPT: every gzip frame of FOLDED is named by an FDE start (or [gzip] outside every
# FDE), and the leaf frames agree, name for name and count for count, with perf script's: in a stack, perf
# prints a symbol-less frame's ELF address ("4330 [unknown] (/usr/bin/gzip)"; -G, without the stack, would
# print the run's virtual address instead).
cat > compare.py << 'PY'
import bisect, collections, re, sys
folded, script, module = sys.argv[1], sys.argv[2], sys.argv[3]
fdes = sorted(tuple(int(x, 16) for x in l.strip()[3:].split('..')) for l in open('fdes.txt'))
starts = [s for s, _ in fdes]
plt = [(int(a, 16), int(a, 16) + int(n, 16)) for a, n in (l.split() for l in open('plt.txt'))]
def in_plt(start): return any(lo <= start < hi for lo, hi in plt)
def expected(addr):  # the FDE around an ELF address, as our name for it
    i = bisect.bisect_right(starts, addr) - 1
    return f'{module}+{fdes[i][0]:#x}' if i >= 0 and addr < fdes[i][1] else f'[{module}]'
ours = re.compile(re.escape(module) + r'\+0x([0-9a-f]+)$')
leaf, boxes = collections.Counter(), set()
for line in open(folded):
    stack, count = line.rstrip('\n').rsplit(' ', 1)
    frames = stack.split(';')
    for f in frames:
        m = ours.match(f)
        if m and int(m.group(1), 16) not in starts:
            sys.exit(f'FAIL: {f} is not the start of an FDE of {module}: one function, several boxes')
        if m or f == f'[{module}]': boxes.add(f)
    m = ours.match(frames[-1])
    if m and in_plt(int(m.group(1), 16)): continue
    if m or frames[-1] == f'[{module}]': leaf[frames[-1]] += int(count)
perf = collections.Counter()
for block in open(script).read().split('\n\n'):  # a sample: a comm line, then its stack, leaf first
    lines = block.strip('\n').split('\n')
    parts = lines[1].split() if len(lines) > 1 else []
    if len(parts) < 3 or not parts[-1].endswith('/' + module + ')'): continue
    if parts[1].endswith('@plt') or (parts[1] == '[unknown]' and in_plt(int(parts[0], 16))): continue
    if parts[1] != '[unknown]': sys.exit(f'FAIL: perf names {parts[0]} {parts[1]}: is {module} stripped?')
    perf[expected(int(parts[0], 16))] += 1
if sum(perf.values()) < 20: sys.exit(f'FAIL: only {sum(perf.values())} samples in {module}')
if leaf != perf:
    diff = sorted(set(leaf) | set(perf), key=lambda n: -abs(leaf[n] - perf[n]))[:8]
    sys.exit('FAIL: leaf frames differ from perf script\'s (name: ours perf): ' +
             ', '.join(f'{n}: {leaf[n]} {perf[n]}' for n in diff))
print(f'ok: {sum(perf.values())} samples in {len(perf)} {module} functions named as perf script places them; '
      f'{len(boxes)} {module} boxes, each an FDE start')
PY
module=$(basename "$gzip")

# 1. perf record's file, read by selfperf report (its own symbolizer, PerfDataSymbolizer).
perf record -q -e cpu-clock:u -F 999 -g -o gz.data -- "$gzip" -c -6 in.txt 2> perf.err > /dev/null ||
  { cat perf.err; echo "skipped: perf record cannot record here"; exit 77; }
"$selfperf" report -i gz.data --folded report.folded > /dev/null 2> report.err || { cat report.err; fail "selfperf report"; }
perf script -i gz.data -F comm,ip,sym,dso 2> /dev/null > report.script || fail "perf script cannot read gz.data"
python3 compare.py report.folded report.script "$module" | sed 's/^ok:/ok: selfperf report:/'

# 2. selfperf record: the preload profiler symbolizes in the profiled process (Symbolizer).
libs=$(ldd "$selfperf")  # not `ldd | grep -q`: an early exit of grep can SIGPIPE ldd
if [[ $libs == *libasan* || $libs == *libtsan* ]]; then
  echo "note: sanitizer build: its preload library cannot be loaded into gzip, selfperf record part skipped"
  exit 0
fi
"$selfperf" record -q -o sp.data -- "$gzip" -c -6 in.txt > /dev/null 2> record.err || { cat record.err; fail "selfperf record"; }
perf script -i sp.data -F comm,ip,sym,dso 2> /dev/null > record.script || fail "perf script cannot read sp.data"
python3 compare.py sp.data.folded record.script "$module" | sed 's/^ok:/ok: selfperf record:/'
