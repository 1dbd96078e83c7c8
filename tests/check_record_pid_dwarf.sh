#!/usr/bin/env bash
# selfperf record -p PID --call-graph dwarf on a process built without frame pointers (record_pid_nofp_target):
# the callers of its hot function, on both of its threads, are the ones the in-process unwinder finds on the
# same workload (selfperf record --call-graph dwarf -- CMD: the preload profiler with libunwind), while the
# kernel's frame-pointer walk (--call-graph kernel) loses them; perf script and perf report read the file and
# show those callers; its attr names no registers nor stack copies; the summary counts the samples unwound.
# Then sizes given to --call-graph dwarf,SIZE that do not fit give one clear line.
# Usage: check_record_pid_dwarf.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
selfperf="$build/bin/selfperf"
target="$build/tests/record_pid_nofp_target"
source "${2:?source dir}/tests/record_pid_helpers.sh"
two_threads() { (( $(ls "/proc/$1/task" 2>/dev/null | wc -l) >= 2 )); }

# The caller chains of nofp_hot_leaf in a .folded file, each from its thread's entry (main, nofp_thread_main)
# down to the leaf, or "cut" where no entry is among the callers: "PERCENT CHAIN", percent of the leaf's samples.
hot_chains() {  # FOLDED
  awk '{ n = $NF; $NF = ""; sub(/ +$/, ""); k = split($0, f, ";"); if (f[k] != "nofp_hot_leaf") next
         for (i = 1; i <= k; i++) if (f[i] == "main" || f[i] == "nofp_thread_main") break
         chain = "cut"
         if (i <= k) { chain = f[i]; for (j = i + 1; j <= k; j++) chain = chain ";" f[j] }
         c[chain] += n; total += n }
       END { for (s in c) printf "%.1f %s\n", 100 * c[s] / total, s }' "$1" | sort -rn
}
# What the target's source says: the two paths to the leaf.
path_a="main;nofp_outer_a;nofp_middle_a;nofp_hot_leaf"
path_b="nofp_thread_main;nofp_outer_b;nofp_middle_b;nofp_hot_leaf"
# The share (percent) of the leaf's samples that the two full paths hold.
full_share() { awk -v a="$path_a" -v b="$path_b" '$2 == a || $2 == b { s += $1 } END { printf "%.0f\n", s }' "$1"; }
# The chains holding at least 5% of the leaf's samples, one line.
main_chains() { awk '$1 >= 5 { print $2 }' "$1" | sort | tr '\n' ' '; }

# 1. The same running process, recorded with stack copies and then with the kernel's walk. While the first
# recording runs, SIGUSR1 makes the target load libcrypt and run it on a thread of its own: code mapped, and a
# thread started, after the attach.
"$target" 0 &
tpid=$!; pids+=("$tpid")
wait_for "the target's second thread" two_threads "$tpid"
"$selfperf" record -p "$tpid" --call-graph dwarf --duration 1.5 -o dwarf.data 2> dwarf.err &
rpid=$!; pids+=("$rpid")
wait_for "selfperf record to attach" grep -qs "^selfperf record: sampling" dwarf.err
kill -USR1 "$tpid"
wait "$rpid" || { rc=$?; cat dwarf.err; fail "selfperf record -p --call-graph dwarf exited $rc"; }
cat dwarf.err
"$selfperf" record -p "$tpid" --call-graph kernel --duration 1.5 -o kernel.data 2> kernel.err ||
  { rc=$?; cat kernel.err; fail "selfperf record -p --call-graph kernel exited $rc"; }
# Copies of 256 bytes hold a few frames above the leaf, not the path up to the thread's entry.
"$selfperf" record -p "$tpid" --call-graph dwarf,256 --duration 0.5 -o short.data 2> short.err ||
  { rc=$?; cat short.err; fail "selfperf record -p --call-graph dwarf,256 exited $rc"; }
kill -TERM "$tpid"
wait "$tpid" || fail "the target exited $? after SIGTERM"

# 2. The same workload profiled from inside (the preload library unwinds each sample in its signal handler).
# In an ASan build the preload library comes before the ASan runtime among the libraries, which ASan refuses;
# the target, built with ASan too, loads that runtime anyway: the order is all that differs. A TSan build's
# profiler walks frame pointers instead of DWARF (libunwind in its handler corrupts TSan: profile.cpp), so
# there the callers are compared with the target's source alone.
inproc=("$selfperf")
libs=$(ldd "$build/lib/libselfperf_profile.so")  # not `ldd | grep -q`: grep's early exit can SIGPIPE ldd
[[ $libs == *libasan* ]] && inproc=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" "$selfperf")
methods=(dwarf kernel inproc)
if [[ $libs == *libtsan* ]]; then
  echo "note: TSan build: no DWARF unwinder in process to compare with"
  methods=(dwarf kernel)
else
  "${inproc[@]}" record --call-graph dwarf -o inproc.data -- "$target" 20000 2> inproc.err ||
    { rc=$?; cat inproc.err; fail "selfperf record --call-graph dwarf -- record_pid_nofp_target exited $rc"; }
fi

for m in "${methods[@]}"; do hot_chains "$m.data.folded" > "$m.chains"; done
for m in "${methods[@]}"; do
  echo "$m: nofp_hot_leaf's callers (percent of its samples):"; sed 's/^/    /' "$m.chains" | head -5
done
for m in "${methods[@]}"; do [[ -s $m.chains ]] || fail "the $m recording has no sample in nofp_hot_leaf"; done
dwarf_full=$(full_share dwarf.chains)
kernel_full=$(full_share kernel.chains)
echo "full paths to nofp_hot_leaf: dwarf $dwarf_full%, kernel frame pointers $kernel_full%"
# Without frame pointers the kernel's walk stops at the leaf (or wanders): its chains are cut.
(( kernel_full < 10 )) || fail "the kernel's walk found the callers ($kernel_full%): is the target built with frame pointers?"
(( dwarf_full >= 90 )) || fail "-p --call-graph dwarf found the full paths in $dwarf_full% of the samples only: $(head -5 dwarf.chains)"
[[ $(main_chains dwarf.chains) == "$path_a $path_b " ]] || fail "the callers are '$(main_chains dwarf.chains)'"
if [[ -s inproc.chains ]]; then
  inproc_full=$(full_share inproc.chains)
  echo "full paths to nofp_hot_leaf in process: $inproc_full%"
  (( inproc_full >= 90 )) || fail "the in-process unwinder found the full paths in $inproc_full% of the samples only"
  [[ $(main_chains dwarf.chains) == "$(main_chains inproc.chains)" ]] ||
    fail "the callers differ: -p dwarf '$(main_chains dwarf.chains)', in-process '$(main_chains inproc.chains)'"
fi

# The library loaded after the attach: its samples' callers reach the thread's entry through libcrypt's own
# frames (named by the library and an offset: it has no symbols for them).
awk '{ n = $NF; $NF = ""; sub(/ +$/, ""); k = split($0, f, ";"); if (f[k] !~ /crypt/) next
       total += n; for (i = 1; i < k; i++) if (f[i] == "nofp_library_thread" && f[i + 1] == "nofp_in_library") break
       if (i < k) full += n }
     END { printf "%d %d\n", total, full }' dwarf.data.folded > library.counts
read -r lib_total lib_full < library.counts
echo "libcrypt, loaded after the attach: $lib_total samples, $lib_full reaching nofp_in_library <- nofp_library_thread"
(( lib_total > 0 )) || fail "no sample in libcrypt: $(grep -c . dwarf.data.folded) stacks, $(cat dwarf.err)"
(( lib_full * 10 >= lib_total * 9 )) || fail "libcrypt's samples lose their callers: $(grep crypt dwarf.data.folded | head -5)"

# 3. The summary counts the unwinds, and they add up to the samples.
read -r full partial iponly < <(sed -n 's/.*stack copies: \([0-9]*\) samples unwound fully, \([0-9]*\) partially, \([0-9]*\) to.*/\1 \2 \3/p' dwarf.err)
samples=$(sed -n 's/.* \([0-9]*\) samples, [0-9]* lost$/\1/p' dwarf.err)
[[ -n ${full:-} && -n $samples ]] || fail "no unwind counts in the summary: $(cat dwarf.err)"
echo "summary: $samples samples: $full fully, $partial partially, $iponly to their ip only"
(( full + partial + iponly == samples )) || fail "the unwind counts do not add up to the $samples samples"
(( full * 10 >= samples * 9 )) || fail "fewer than 90% of the samples unwound fully: $(cat dwarf.err)"
grep -q "call chains unwound from 8192-byte stack copies" dwarf.err || fail "the attach line does not say dwarf: $(head -1 dwarf.err)"
# The short copies: partial unwinds, said so, with the remedy.
grep -q "call chains unwound from 256-byte stack copies" short.err || fail "dwarf,256: $(head -1 short.err)"
read -r sfull spartial < <(sed -n 's/.*stack copies: \([0-9]*\) samples unwound fully, \([0-9]*\) partially.*/\1 \2/p' short.err)
echo "dwarf,256: ${sfull:-?} fully, ${spartial:-?} partially"
[[ ${spartial:-0} -gt 0 && ${sfull:-1} -lt ${spartial:-0} ]] || fail "dwarf,256: not mostly partial unwinds: $(cat short.err)"
grep -q "stopped above the stack copy: copy more, as in --call-graph dwarf,512" short.err ||
  fail "dwarf,256: no remedy for the partial unwinds: $(cat short.err)"

# 4. perf reads the file: its samples hold call chains (the attr says so, and no registers nor stacks)...
perf evlist -v -i dwarf.data > evlist.txt 2>&1 || fail "perf evlist cannot read dwarf.data: $(cat evlist.txt)"
grep -q "sample_type: .*CALLCHAIN" evlist.txt || fail "the attr has no CALLCHAIN: $(cat evlist.txt)"
! grep -Eq "REGS_USER|STACK_USER|sample_regs_user|sample_stack_user" evlist.txt ||
  fail "the attr names registers or stack copies its samples do not hold: $(cat evlist.txt)"
# ...and perf script shows each sample's frames: leaf, then its callers, up to the thread's entry.
perf script -i dwarf.data -F tid,ip,sym > script.txt 2> script.err || fail "perf script cannot read dwarf.data: $(cat script.err)"
awk '/^\t/ { if (n < 4) chain = chain (n ? ";" : "") $2; n++; next }
     NF >= 1 { if (n) print chain; chain = ""; n = 0 }
     END { if (n) print chain }' script.txt | sort | uniq -c | sort -rn > script.chains
a_n=$(awk '$2 == "nofp_hot_leaf;nofp_middle_a;nofp_outer_a;main" { print $1 }' script.chains)
b_n=$(awk '$2 == "nofp_hot_leaf;nofp_middle_b;nofp_outer_b;nofp_thread_main" { print $1 }' script.chains)
echo "perf script: $(awk '{ n += $1 } END { print n }' script.chains) samples; ${a_n:-0} main <- nofp_outer_a <- nofp_middle_a <- leaf, ${b_n:-0} nofp_thread_main <- nofp_outer_b <- nofp_middle_b <- leaf"
[[ ${a_n:-0} -gt 0 && ${b_n:-0} -gt 0 ]] || fail "perf script does not show both paths: $(head script.chains)"
perf report -i dwarf.data --stdio --no-children --sort sym -G > report.txt 2> report.err ||
  fail "perf report cannot read dwarf.data: $(cat report.err)"
for f in nofp_middle_a nofp_outer_a nofp_middle_b nofp_outer_b nofp_thread_main; do
  grep -q "$f" report.txt || fail "perf report's call graph has no $f: $(head -40 report.txt)"
done
echo "ok: perf report's call graph shows the callers"

# 5. Sizes that do not fit: a line that names the option and the remedy (then the usage), exit status 2.
for bad in dwarf,12 dwarf,0 dwarf,65536 dwarf,x fp,8192; do
  out=$("$selfperf" record -p 1 --call-graph "$bad" 2>&1) && rc=0 || rc=$?
  [[ $rc == 2 ]] && head -1 <<<"$out" | grep -q "\-\-call-graph $bad: give dwarf,SIZE .*multiple of 8" ||
    fail "--call-graph $bad: rc $rc, '$out'"
done
out=$("$selfperf" record --call-graph dwarf,8192 -- true 2>&1) && rc=0 || rc=$?
[[ $rc == 2 ]] && grep -q "the stack copy size is for -p" <<<"$out" || fail "--call-graph dwarf,8192 -- CMD: rc $rc, '$out'"
"$selfperf" record --help | grep -q -- "--call-graph dwarf\[,SIZE\]" || fail "record --help does not describe dwarf for -p"
echo "ok"
