#!/usr/bin/env bash
# The default unwinding (DWARF, in the sampled process) against perf record --call-graph dwarf (stack copies
# unwound afterwards by perf) on three programs nobody here wrote, built without frame pointers: Debian's
# python3 running a small pure-Python workload, gzip -6 of generated text, and g++ -O2 -c of a small C++
# file (g++ execs cc1plus and as: selfperf record follows the tree). Each is recorded by both on the same
# event (the one selfperf's file says it opened: cpu-clock as root, cpu-clock:u unprivileged) at 999 Hz, and
# the inclusive share of each function (the fraction of samples whose stack holds it, once per stack however
# deep the recursion) must agree within a tolerance of four standard errors of two ~1000-sample estimates.
# The check then unwinds gzip with frame pointers and must tell that apart. See docs/sampling.md,
# "Unwinding against perf on real programs", for what is compared how and the shares measured here.
# Usage: check_unwind_vs_perf.sh BUILD_DIR SOURCE_DIR
#   UNWIND_VS_PERF_CALL_GRAPH=fp (or kernel) records our side with that --call-graph instead: the check fails.
set -euo pipefail
build=$(realpath "${1:?build dir}")
selfperf=$build/bin/selfperf
lib=$build/lib/libselfperf_profile.so
[[ -x $selfperf && -f $lib ]] || { echo "FAIL: build selfperf_cli and selfperf_profile first"; exit 1; }
skip() { echo "skipped: $*"; exit 77; }
[[ -e /proc/sys/kernel/perf_event_paranoid ]] || skip "this kernel has no perf events"
libs=$(ldd "$lib")  # not `ldd | grep -q`: an early exit of grep can SIGPIPE ldd
if [[ $libs == *libasan* || $libs == *libtsan* ]]; then
  skip "sanitizer build: the sanitized preload library cannot be loaded into python3, gzip and g++"
fi
command -v perf > /dev/null || skip "perf is not installed (apt-get install linux-perf)"
command -v readelf > /dev/null || skip "readelf (binutils) is not installed"
python=/usr/bin/python3  # Debian's, not a pyenv shim or a virtualenv's found first in PATH
[[ -x $python ]] || skip "$python is not installed"
gzip=$(command -v gzip) || skip "gzip is not installed"
command -v g++ > /dev/null || skip "g++ is not installed"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export HOME=$work
fail() { echo "FAIL: $*"; exit 1; }
ours_graph=()
[[ -n ${UNWIND_VS_PERF_CALL_GRAPH:-} ]] && ours_graph=(--call-graph "$UNWIND_VS_PERF_CALL_GRAPH")

# Five call paths, interleaved in short rounds so that each gets the same share of whatever else the machine
# is doing (run one after another, their shares moved by up to 6 points between runs on a loaded machine).
# About 1.2 s of CPU on this VM when quiet: ~1200 samples at 999 Hz.
cat > work.py << 'PY'
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def sort_words(n):
    return sorted(str((i * 7919) % 100003) for i in range(n))

def count_keys(n):
    d = {}
    for i in range(n):
        d[i % 1000] = d.get(i % 1000, 0) + i
    return d

def format_lines(n):
    return ",".join("%d-%s" % (i, "x" * (i % 7)) for i in range(n))

def read_zeros(n):  # CPU time in the kernel, sampled where the event counts it (root's cpu-clock)
    with open("/dev/zero", "rb", buffering=0) as f:
        for _ in range(n):
            f.read(65536)

for _ in range(28):
    fib(19)
    sort_words(50000)
    count_keys(80000)
    format_lines(50000)
    read_zeros(4000)
PY
# Text gzip -6 takes about a second for (16 MB; less repetitive than seq's, so deflate searches longer).
"$python" - << 'PY'
import random
random.seed(1)
words = "the quick brown fox jumps over the lazy dog lorem ipsum dolor sit amet".split()
with open("in.txt", "w") as f:
    for i in range(350000):
        f.write("%d %s %x\n" % (i, " ".join(random.choice(words) for _ in range(5)), random.getrandbits(32)))
PY
cat > unit.cpp << 'CPP'
#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>
template <int N> struct Fib { static constexpr long value = Fib<N - 1>::value + Fib<N - 2>::value; };
template <> struct Fib<1> { static constexpr long value = 1; };
template <> struct Fib<0> { static constexpr long value = 0; };
std::map<std::string, std::vector<int>> index_words(const std::vector<std::string>& words) {
  std::map<std::string, std::vector<int>> m;
  for (int i = 0; i < static_cast<int>(words.size()); ++i) m[words[i]].push_back(i);
  return m;
}
std::unordered_map<long, std::string> names(const std::vector<long>& v) {
  std::unordered_map<long, std::string> m;
  for (long x : v) m.emplace(x, std::to_string(x * Fib<40>::value));
  return m;
}
long sum_sorted(std::vector<long> v) {
  std::sort(v.begin(), v.end());
  long s = 0;
  for (long x : v) s += x;
  return s;
}
std::string describe(const std::set<std::string>& s) {
  std::ostringstream out;
  for (const auto& x : s) out << x << ':' << x.size() << '\n';
  return out.str();
}
CPP

# perf's side of g++ is cc1plus run directly, with the arguments g++ gives it (-###): in a process perf
# record sees exec'd by one it already follows (g++ -> cc1plus, bash -> gzip), perf's DWARF unwinding fails
# out of every libc frame in about half the runs (all of that process's samples, none of another's: stacks
# end at __libc_start_call_main, `perf script -v` says "unwind: no map for 4", a return address read from
# argc's slot). The same program as perf's own child unwinds to _start. g++'s driver and as take a few
# samples of ~1000 and are left out of both sides.
cc1plus_line=$(g++ -O2 -c unit.cpp -o unit.o -### 2>&1 | grep -m1 '/cc1plus ') ||
  skip "g++ -### names no cc1plus: $(g++ -O2 -c unit.cpp -o unit.o -### 2>&1 | tail -3)"
eval "cc1plus=($cc1plus_line)"
for ((i = 0; i < ${#cc1plus[@]} - 1; i++)); do [[ ${cc1plus[i]} == -o ]] && cc1plus[i + 1]=$work/unit.s; done

# The shares, one table per program. A frame is named as our folded stacks name it (docs/frame-names.md);
# perf's names are matched to ours: a symbol without its version (@GLIBC_2.34) and, for C++, without its
# parameters (perf demangles without them); a frame perf prints as [unknown] in a file is named by the FDE of
# the module's .eh_frame around its address, as ours is (module+0x<FDE start>); perf prints the file offset
# there, which is turned into the ELF address through the program headers (they differ for a non-PIE
# executable, e.g. python3.11 is linked at 0x400000). Kernel frames (perf's, root's cpu-clock) are dropped, as
# are frames neither side can name ([unknown], [module]).
cat > compare.py << 'PY'
import bisect, collections, math, os, re, subprocess, sys
folded, script, comm = sys.argv[1], sys.argv[2], sys.argv[3]
TOP, FLOOR, SIGMAS, MIN_SAMPLES, ROWS = 10, 5.0, 4.0, 300, 25
elf = {}
def module(path):
    if path not in elf:
        run = lambda *a: subprocess.run(['readelf', *a, path], capture_output=True, text=True).stdout
        loads = [(int(f[1], 16), int(f[2], 16), int(f[4], 16)) for f in
                 (l.split() for l in run('-lW').splitlines()) if f and f[0] == 'LOAD']
        fdes = sorted(tuple(int(x, 16) for x in m.split('..')) for m in
                      re.findall(r'pc=([0-9a-f]+\.\.[0-9a-f]+)', run('--debug-dump=frames')))
        elf[path] = (loads, [s for s, _ in fdes], fdes)
    return elf[path]
def fde_name(path, offset):
    loads, starts, fdes = module(path)
    addr = next((offset - o + v for o, v, size in loads if o <= offset < o + size), offset)
    i = bisect.bisect_right(starts, addr) - 1
    return f'{os.path.basename(path)}+{fdes[i][0]:#x}' if i >= 0 and addr < fdes[i][1] else None
def without_parameters(name):
    end = re.search(r'\)( const)?$', name)
    if not end: return name
    depth = 0
    for i in range(end.start(), -1, -1):
        depth += {')': 1, '(': -1}.get(name[i], 0)
        if depth == 0: return name[:i]
    return name
def nameable(name): return bool(name) and not name.startswith('[')

ours, n_ours = collections.Counter(), 0
for line in open(folded):
    stack, count = line.rstrip('\n').rsplit(' ', 1)
    frames = stack.split(';')
    if frames[0] != comm: continue
    n_ours += int(count)
    for f in {without_parameters(f) for f in frames[1:]}:
        if nameable(f): ours[f] += int(count)
perf, n_perf = collections.Counter(), 0
frame = re.compile(r'\s*([0-9a-f]+) (.*) \((.*)\)$')
n_startup = n_broken = 0
for block in open(script).read().split('\n\n'):
    lines = [l for l in block.split('\n') if l.strip()]
    if not lines or lines[0].split()[0] != comm: continue
    user = [m for m in map(frame.match, lines[1:]) if m and not m.group(3).startswith('[kernel')]
    if any(m.group(2) == '_dl_start' for m in user):
        n_startup += 1  # the dynamic loader relocating, before any constructor: ours starts sampling later
        continue
    n_perf += 1
    # perf's unwinding gave up (its last frame is the error marker), or it found no frame at all
    if not user or user[-1].group(1) == 'ffffffffffffffff': n_broken += 1
    names, leaf = set(), True
    for m in user:
        ip, sym, dso = int(m.group(1), 16), m.group(2), m.group(3)
        if sym == '[unknown]':
            # a caller's address is its return address: the call is the byte before it
            name = fde_name(dso, ip if leaf else ip - 1) if dso.startswith('/') else None
        else:
            name = re.sub(r'@.*', '', sym)
        leaf = False
        if name and nameable(name): names.add(name)
    for name in names: perf[name] += 1
print(f'{comm}: {n_ours} samples ours, {n_perf} perf ({n_broken} of them unwound by perf only part of the way, '
      f'{n_startup} more in the dynamic loader\'s start-up left out)')
if min(n_ours, n_perf) < MIN_SAMPLES:
    sys.exit(f'FAIL: {comm}: fewer than {MIN_SAMPLES} samples on a side: too few to compare shares')
share = lambda c, n, f: 100.0 * c[f] / n
compared = [f for f, _ in perf.most_common(TOP)]
compared += sorted((f for f in set(perf) | set(ours) if f not in compared and
                    max(share(perf, n_perf, f), share(ours, n_ours, f)) >= FLOOR),
                   key=lambda f: -share(perf, n_perf, f))
bad, rows = [], []
for f in compared:
    p, o = share(perf, n_perf, f), share(ours, n_ours, f)
    pooled = (perf[f] + ours[f]) / (n_perf + n_ours)
    tol = max(2.0, SIGMAS * 100 * math.sqrt(pooled * (1 - pooled) * (1 / n_perf + 1 / n_ours)))
    # a stack perf gave up on lacks its callers: ours may hold them that much more often
    ok = -tol <= o - p <= tol + 100.0 * n_broken / n_perf
    if not ok: bad.append(f)
    if len(rows) < ROWS or not ok:
        rows.append(f'  {f[:44]:<44} {p:7.1f} {o:7.1f} {o - p:+6.1f} {tol:5.1f}{"" if ok else "  <-- differs"}')
print(f'  {"function":<44} {"perf %":>7} {"ours %":>7} {"diff":>6} {"tol":>5}')
print('\n'.join(rows))
if len(compared) > len(rows): print(f'  ... and {len(compared) - len(rows)} more within tolerance')
if bad:
    sys.exit(f'FAIL: {comm}: {len(bad)} of {len(compared)} functions outside the tolerance: ' + ', '.join(bad[:5]))
print(f'ok: {comm}: {len(compared)} functions (perf\'s top {TOP} and all at {FLOOR:g} % or more) within tolerance')
PY

# record NAME COMM: ours_cmd under selfperf record, then perf_cmd under perf record on the event our file
# says was opened; compares COMM's samples.
record() {
  local name=$1 comm=$2 event
  "$selfperf" record -q -o "$name.ours.data" -F 999 -e cpu-clock "${ours_graph[@]}" -- "${ours_cmd[@]}" \
    > /dev/null 2> "$name.ours.err" || { cat "$name.ours.err"; fail "$name: selfperf record failed"; }
  # (perf evlist prints the name our file gives, "cpu-clock", either way: the attribute says which it was)
  event=$(perf evlist -v -i "$name.ours.data" 2> /dev/null | head -1)
  [[ $event == cpu-clock:* ]] || fail "$name: perf evlist -v reads '$event' from our file"
  if [[ $event == *"exclude_kernel: 1"* ]]; then event=cpu-clock:u; else event=cpu-clock; fi
  perf record -q -e "$event" -F 999 --call-graph dwarf,16384 -o "$name.perf.data" -- "${perf_cmd[@]}" \
    > /dev/null 2> "$name.perf.err" ||
    { cat "$name.perf.err"; skip "perf record --call-graph dwarf cannot record here (perf_event_mlock_kb?)"; }
  perf script -i "$name.perf.data" -F comm,ip,sym,dso --no-inline > "$name.perf.txt" 2> /dev/null ||
    fail "$name: perf script cannot read $name.perf.data"
  echo "$name, on $event:"
  "$python" compare.py "$name.ours.data.folded" "$name.perf.txt" "$comm"
}

status=0
ours_cmd=("$python" work.py) perf_cmd=("$python" work.py)
record python python3 || status=1
ours_cmd=("$gzip" -6 -c in.txt) perf_cmd=("$gzip" -6 -c in.txt)
record gzip gzip || status=1
ours_cmd=(g++ -O2 -c unit.cpp -o unit.o) perf_cmd=("${cc1plus[@]}")
record g++ cc1plus || status=1
echo "  (our g++ tree, samples: $(awk -F';' '{ split($NF, c, " "); n[$1] += c[length(c)] }
  END { for (p in n) printf "%s %d, ", p, n[p] }' g++.ours.data.folded | sed 's/, $//'))"
[[ $status -eq 0 ]] || exit 1

# The comparison tells broken unwinding apart: frame pointers, which these binaries do not keep.
if [[ -z ${UNWIND_VS_PERF_CALL_GRAPH:-} ]]; then
  "$selfperf" record -q -o fp.data -F 999 -e cpu-clock --call-graph fp -- "$gzip" -6 -c in.txt > /dev/null ||
    fail "selfperf record --call-graph fp failed"
  if "$python" compare.py fp.data.folded gzip.perf.txt gzip > fp.txt 2>&1; then
    cat fp.txt
    fail "frame-pointer stacks of gzip pass as perf's DWARF ones: the comparison cannot tell"
  fi
  echo "ok: gzip unwound with --call-graph fp is told apart: $(grep -o 'FAIL: .*' fp.txt)"
fi
