#!/usr/bin/env bash
# The default unwinding (DWARF, in the sampled process) against perf record --call-graph dwarf (stack copies
# unwound afterwards by perf) on three programs nobody here wrote, built without frame pointers: Debian's
# python3 running a small pure-Python workload, gzip -6 of generated text, and cc1plus compiling a small C++
# file with -O2 (the arguments g++ gives it). Both sample the same run: selfperf record runs perf record,
# which runs the program (a fork and an exec that selfperf record follows), both on cpu-clock at 999 Hz
# (kernel time counted where the user may count it, by perf as by us). The inclusive share of each function
# (the fraction of samples whose stack holds it, once per stack however deep the recursion) must agree within
# four standard errors of the difference of two such shares. Then gzip unwound with frame pointers, which
# these binaries do not keep, must fail the comparison. docs/sampling.md, "Unwinding against perf on real
# programs", says what is compared how, and the shares measured here.
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
  skip "sanitizer build: the sanitized preload library cannot be loaded into perf, python3, gzip and cc1plus"
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

# Five call paths, interleaved in short rounds. About 2 s of CPU on this VM: ~2000 samples at 999 Hz.
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

for _ in range(48):
    fib(19)
    sort_words(50000)
    count_keys(80000)
    format_lines(50000)
    read_zeros(4000)
PY
# Text gzip -6 takes about two seconds for: a 4 MB block of random words, 7 times (deflate looks back 32 KB
# only, so a repeated block costs it what fresh text would).
"$python" - << 'PY'
import random
random.seed(1)
words = "the quick brown fox jumps over the lazy dog lorem ipsum dolor sit amet".split()
block = "".join("%d %s %x\n" % (i, " ".join(random.choices(words, k=5)), random.getrandbits(32))
                for i in range(100000))
with open("in.txt", "w") as f:
    for _ in range(7):
        f.write(block)
PY
# About 1.5 s of cc1plus at -O2: templates instantiated for several types.
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
template <typename Key, typename Value>
std::map<Key, std::vector<Value>> index_by(const std::vector<Key>& keys, const std::vector<Value>& values) {
  std::map<Key, std::vector<Value>> m;
  for (std::size_t i = 0; i < keys.size() && i < values.size(); ++i) m[keys[i]].push_back(values[i]);
  return m;
}
template <typename T>
std::string describe(const std::set<T>& s) {
  std::ostringstream out;
  for (const auto& x : s) out << x << '\n';
  return out.str();
}
template <typename T>
T sum_sorted(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  T s{};
  for (const T& x : v) s += x;
  return s;
}
std::unordered_map<long, std::string> names(const std::vector<long>& v) {
  std::unordered_map<long, std::string> m;
  for (long x : v) m.emplace(x, std::to_string(x * Fib<40>::value));
  return m;
}
template std::map<std::string, std::vector<int>> index_by(const std::vector<std::string>&, const std::vector<int>&);
template std::map<long, std::vector<double>> index_by(const std::vector<long>&, const std::vector<double>&);
template std::map<std::string, std::vector<std::string>> index_by(const std::vector<std::string>&,
                                                                 const std::vector<std::string>&);
template std::string describe(const std::set<std::string>&);
template std::string describe(const std::set<long>&);
template std::string describe(const std::set<double>&);
template long sum_sorted(std::vector<long>);
template double sum_sorted(std::vector<double>);
template std::string sum_sorted(std::vector<std::string>);
CPP

# cc1plus runs as perf's own child, with the arguments g++ gives it (-###), not under g++: perf's DWARF
# unwinding fails out of every libc frame of a process exec'd by one it already follows (g++ -> cc1plus,
# bash -> gzip) in about half the runs. perf takes the lowest start among a process's maps of a file for its
# load base (read_unwind_spec_eh_frame), and the child still holds its parent's maps after the exec: in 6 runs
# of 6 it failed exactly where the parent's libc lay below the child's (stacks end at __libc_start_call_main;
# `perf script -v` says "unwind: no map for 4", a return address read from argc's slot).
cc1plus_line=$(g++ -O2 -c unit.cpp -o unit.o -### 2>&1 | grep -m1 '/cc1plus ') ||
  skip "g++ -### names no cc1plus: $(g++ -O2 -c unit.cpp -o unit.o -### 2>&1 | tail -3)"
eval "cc1plus=($cc1plus_line)"
for ((i = 0; i < ${#cc1plus[@]} - 1; i++)); do [[ ${cc1plus[i]} == -o ]] && cc1plus[i + 1]=$work/unit.s; done

# The shares, one table per program. A frame is named as our folded stacks name it (docs/frame-names.md);
# perf's names are matched to ours: a symbol without its version (@GLIBC_2.34) and, for C++, without its
# parameters (perf demangles without them). A frame perf prints as [unknown] in a file, or as a PLT stub
# (memcmp@plt), is named by the FDE of the module's .eh_frame around its address, as ours is
# (module+0x<FDE start>); perf prints the file offset there, turned into the ELF address through the program
# headers (they differ in a non-PIE executable: python3.11 is linked at 0x400000). Kernel frames (perf's, of
# root's cpu-clock) are dropped, and so are frames neither side can name ([unknown], [module]).
cat > compare.py << 'PY'
import bisect, collections, math, os, re, subprocess, sys
folded, script, comm = sys.argv[1], sys.argv[2], sys.argv[3]
TOP, FLOOR, SIGMAS, MIN_SAMPLES, ROWS = 10, 5.0, 4.0, 500, 25
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
n_startup = n_broken = n_drain = 0
for block in open(script).read().split('\n\n'):
    lines = [l for l in block.split('\n') if l.strip()]
    if not lines or lines[0].split()[0] != comm: continue
    # A tick of perf's that lands in our signal handler unwinds through it and the signal frame to the
    # interrupted program: its stack is the program's, as ours is. Both tick at 999 Hz, so such ticks come in
    # runs (one CI run: 20 % of perf's python3 samples in our handler, each of its functions a row 'perf only').
    # Dropped: our handler's frames (with what it called, leafward of them) and the signal trampoline
    # (__restore_rt) above them, which perf names by symbol where it has one or, as a caller (its address - 1
    # falls before the symbol, in the FDE glibc starts a byte early), [unknown]: libc.so.6+0x3c04f.
    user = [m for m in map(frame.match, lines[1:]) if m and not m.group(3).startswith('[kernel')]
    handler = [i for i, m in enumerate(user) if m.group(3).endswith('/libselfperf_profile.so')]
    if handler and user[handler[-1] + 1:] and user[handler[-1] + 1].group(2) == 'start_thread':
        # our drain thread (ours never samples it): perf counts it in the program's samples, where it lacks
        # main (one CI run: 1.1 % of perf's cc1plus samples, writing the profile; cc1plus failed on main)
        n_drain += 1
        continue
    if handler: user = user[handler[-1] + 2:]
    user = [m for m in user if m.group(2) != '__restore_rt']
    if any(m.group(2) == '_dl_start' for m in user):
        n_startup += 1  # the dynamic loader relocating, before any constructor: ours starts sampling later
        continue
    n_perf += 1
    # perf's unwinding gave up (its last frame is the error marker), or it found no frame at all
    if not user or user[-1].group(1) == 'ffffffffffffffff': n_broken += 1
    names, leaf = set(), True
    for m in user:
        ip, sym, dso = int(m.group(1), 16), m.group(2), m.group(3)
        if sym == '[unknown]' or sym.endswith('@plt'):
            # a caller's address is its return address: the call is the byte before it. A PLT stub has no
            # symbol: perf makes one from the relocations (memcmp@plt), ours is the .plt's FDE
            name = fde_name(dso, ip if leaf else ip - 1) if dso.startswith('/') else None
        else:
            name = re.sub(r'@.*', '', sym)
        leaf = False
        if name and nameable(name): names.add(name)
    for name in names: perf[name] += 1
print(f'{comm}: {n_ours} samples ours, {n_perf} perf ({n_broken} of them unwound by perf only part of the way, '
      f'{n_startup} more in the dynamic loader\'s start-up and {n_drain} of our drain thread left out)')
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
worst = max(compared, key=lambda f: abs(share(ours, n_ours, f) - share(perf, n_perf, f)))
print(f'ok: {comm}: {len(compared)} functions (perf\'s top {TOP} and all at {FLOOR:g} % or more) within tolerance; '
      f'largest difference {share(ours, n_ours, worst) - share(perf, n_perf, worst):+.1f} points ({worst})')
PY

# record NAME COMM COMMAND...: selfperf record runs perf record, which runs COMMAND; compares COMM's samples.
record() {
  local name=$1 comm=$2 ours perf
  shift 2
  "$selfperf" record -q -o "$name.ours.data" -F 999 -e cpu-clock "${ours_graph[@]}" -- \
    perf record -q -e cpu-clock -F 999 --call-graph dwarf,16384 -o "$name.perf.data" -- "$@" \
    > /dev/null 2> "$name.err" || { cat "$name.err"; fail "$name: selfperf record of perf record failed"; }
  perf script -i "$name.perf.data" -F comm,ip,sym,dso --no-inline > "$name.perf.txt" 2> /dev/null ||
    fail "$name: perf script cannot read $name.perf.data"
  # The same event: perf opens cpu-clock:u by itself where the kernel may not be counted, and so must we
  # (perf evlist prints the name each file gives: the attribute says which it was).
  ours=$(perf evlist -v -i "$name.ours.data" 2> /dev/null | grep -o 'exclude_kernel: 1' || true)
  perf=$(perf evlist -v -i "$name.perf.data" 2> /dev/null | grep -o 'exclude_kernel: 1' || true)
  [[ $ours == "$perf" ]] ||
    fail "$name: one run, two events: ours '${ours:-exclude_kernel: 0}', perf's '${perf:-exclude_kernel: 0}'"
  echo "$name, on cpu-clock${perf:+:u}:"
  "$python" compare.py "$name.ours.data.folded" "$name.perf.txt" "$comm"
}

perf record -q -e cpu-clock -F 999 --call-graph dwarf,16384 -o probe.data -- true > /dev/null 2> probe.err ||
  { cat probe.err; skip "perf record --call-graph dwarf cannot record here (perf_event_paranoid? mlock limits?)"; }
status=0
record python python3 "$python" work.py || status=1
record gzip gzip "$gzip" -6 -c in.txt || status=1
record cc1plus cc1plus "${cc1plus[@]}" || status=1
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
