#!/usr/bin/env bash
# Whole-program mode: LD_PRELOAD=lib/libselfperf_profile.so SELFPERF_PROFILE=out.data profiles every thread
# (threads created later included) and writes out.data, out.data.folded, out.data.svg that perf reads; a
# forked child neither writes the files nor stops the parent's sampling; an exec'd program inherits the
# profile (into a file of its own: check_profile_tree.sh). The same with selfperf::profile_from_env() called by the program (--manual).
# Usage: check_profile_preload.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$(dirname "$0")/preload_helpers.sh"
preload_setup "${1:?build dir}" samples/profile_workload
program=$build/samples/profile_workload
export HOME=$tmp

check_profile() {  # mode data
  local mode=$1 data=$2
  [[ -s $data && -s $data.folded && -s $data.svg ]] || fail "$mode: $data, .folded or .svg missing"
  grep -q "</svg>" "$data.svg" || fail "$mode: SVG incomplete"
  grep -q "thread_burn_one" "$data.folded" || fail "$mode: folded stacks lack thread_burn_one"
  grep -q "child_burn" "$data.folded" && fail "$mode: the forked child's samples reached the parent's profile"
  command -v perf >/dev/null 2>&1 || { echo "note: perf absent, perf checks skipped"; return 0; }
  perf script -i "$data" -F tid,ip,sym 2>/dev/null > script.txt || fail "$mode: perf script cannot read $data"
  for fn in thread_burn_one thread_burn_two main_burn; do
    grep -q "$fn" script.txt || fail "$mode: perf script shows no $fn"
  done
  grep -q "child_burn" script.txt && fail "$mode: perf script shows the child's child_burn"
  # Samples per thread: the main thread burns ms+2 before and ms/3+2 after the fork, the workers ms and ms+1
  # (CPU time), so the main thread has clearly more only if sampling survived the child's exit.
  perf script -i "$data" -F tid 2>/dev/null | sort | uniq -c | sort -rn > tids.txt
  [[ $(wc -l < tids.txt) -ge 3 ]] || fail "$mode: samples from fewer than 3 threads: $(cat tids.txt)"
  awk 'NR == 1 { main = $1 } NR == 3 { third = $1 } END { exit !(main >= 1.15 * third) }' tids.txt ||
    fail "$mode: main thread not sampled after the fork: $(tr '\n' ' ' < tids.txt)"
  echo "ok: $mode: threads $(awk '{ printf "%s ", $1 }' tids.txt)samples"
}

if sanitized; then
  # The workload forks while its drain thread runs: in the child, memory that thread held is unreachable and
  # LeakSanitizer reports it at the child's exit (a false positive of fork without exec).
  export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
fi
if sanitized; then
  echo "note: sanitizer build: LD_PRELOAD of a sanitized library into a plain program is not possible, preload part skipped"
else
  LD_PRELOAD=$lib SELFPERF_PROFILE=$tmp/pre.data "$program" 300 > preload.out 2> preload.err || {
    cat preload.err; fail "preload run failed"; }
  grep -q "exec child sees SELFPERF_PROFILE='$tmp/pre.data'" preload.out || fail "exec'd child lost SELFPERF_PROFILE"
  check_profile preload "$tmp/pre.data"

  # A profiled process that execs: the profile is written first, and no sample signal queued during the exec
  # reaches the new program (whose handlers exec reset: it would die of it, as 25 runs in 30 of a
  # pyenv-style shell wrapper did before the preload wrapped the exec functions).
  for run in $(seq 1 20); do
    rm -f "$tmp/exec.data"
    status=0
    LD_PRELOAD=$lib SELFPERF_PROFILE=$tmp/exec.data bash -c \
      'for ((i = 0; i < 30000; i++)); do :; done; exec bash -c "for ((i = 0; i < 3000; i++)); do :; done"' ||
      status=$?
    [[ $status -eq 0 ]] || fail "run $run: the exec'd program died (status $status)"
    [[ -s $tmp/exec.data ]] || fail "run $run: no profile written before exec"
  done
  echo "ok: 20 profiled processes exec'd, none killed, each profile written"
fi

SELFPERF_PROFILE=$tmp/manual.data "$program" --manual 300 > manual.out 2> manual.err || {
  cat manual.err; fail "--manual run failed"; }
check_profile manual "$tmp/manual.data"
[[ $(ls "$tmp"/*.data | wc -l) -eq $(ls "$tmp"/*.data.folded | wc -l) ]] || fail "a stray perf.data appeared"

SELFPERF_PROFILE=$tmp/bad.data SELFPERF_UNWINDER=nonsense "$program" --manual 10 > /dev/null 2> bad.err && fail "bad SELFPERF_UNWINDER accepted"
grep -q "SELFPERF_UNWINDER=nonsense" bad.err || fail "bad SELFPERF_UNWINDER not named: $(cat bad.err)"
echo "ok: bad option named"
