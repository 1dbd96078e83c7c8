#!/usr/bin/env bash
# Process trees in the bare preload mode: every process of a run (a sh -c wrapper's children, a fork+exec
# child, the program a process execs into) writes its own profile; none overwrites another's; %p names files
# by pid; a profile of an earlier run is replaced; a process that took no sample, or could not profile, leaves
# no file; each process names its file on stderr, and SELFPERF_QUIET=1 silences that.
# Usage: check_profile_tree.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$(dirname "$0")/preload_helpers.sh"
preload_setup "${1:?build dir}"
skip_sanitized "the sanitized preload library cannot be LD_PRELOADed into sh and bash"
have_perf=yes
command -v perf >/dev/null 2>&1 || { have_perf=no; echo "note: perf absent, perf checks skipped"; }

# CPU-bound work in bash itself: enough CPU time for dozens of samples at 999 Hz on any machine.
burn='for ((i = 0; i < 100000; i++)); do :; done'

profiles() { ls "$@" 2>/dev/null | grep -v -e '\.folded$' -e '\.svg$' || true; }

# perf script's sample count in a file, and the pids it shows.
check_readable() {  # file
  local f=$1
  [[ $have_perf == yes ]] || return 0
  perf script -i "$f" -F comm,pid 2>/dev/null > script.txt || fail "perf script cannot read $f"
  [[ -s script.txt ]] || fail "$f has no samples"
}

# 1. A wrapper that runs one bash as a fork+exec child and execs into another (same pid as the wrapper),
#    over a stale profile of an earlier run.
echo "an earlier run's profile" > tree.data
touch -d '1 hour ago' tree.data
LD_PRELOAD=$lib SELFPERF_PROFILE=$tmp/tree.data sh -c "bash -c '$burn'; exec bash -c '$burn'" 2> tree.err ||
  { cat tree.err; fail "wrapper chain failed"; }
mapfile -t files < <(profiles tree.data*)
[[ ${#files[@]} -ge 2 ]] || fail "expected a profile per bash, got: ${files[*]}; stderr: $(cat tree.err)"
pids=()
for f in "${files[@]}"; do
  grep -q "wrote $tmp/$f " tree.err || fail "no stderr line names $f: $(cat tree.err)"
  [[ -s $f.folded && -s $f.svg ]] || fail "$f.folded or $f.svg missing"
  check_readable "$f"
  [[ $have_perf == yes ]] && pids+=("$(sort -u script.txt | tr -s ' ' | tr '\n' ,)")
done
grep -q "an earlier run" tree.data && fail "the earlier run's tree.data was not replaced"
if [[ $have_perf == yes ]]; then
  [[ $(printf '%s\n' "${pids[@]}" | sort -u | wc -l) -eq ${#files[@]} ]] ||
    fail "two files hold the same process's samples (processes per file: ${pids[*]})"
fi
[[ $(grep -Ec "^selfperf: bash\[[0-9]+\]: [0-9]+ samples?," tree.err) -ge 2 ]] ||
  fail "fewer than two bash summaries: $(cat tree.err)"
echo "ok: wrapper chain: ${#files[@]} profiles (${files[*]}), processes per file: ${pids[*]:-perf absent}"

# 2. %p, and a process that execs into another image of the same pid: p.<pid>.data then p.<pid>.data.1.
LD_PRELOAD=$lib SELFPERF_PROFILE=$tmp/p.%p.data bash -c "$burn; exec bash -c '$burn'" 2> p.err ||
  { cat p.err; fail "%p run failed"; }
mapfile -t files < <(profiles p.*.data*)
[[ ${#files[@]} -eq 2 && ${files[0]}.1 == "${files[1]}" && ${files[0]} =~ ^p\.[0-9]+\.data$ ]] ||
  fail "%p: expected p.<pid>.data and p.<pid>.data.1, got: ${files[*]}; $(cat p.err)"
for f in "${files[@]}"; do check_readable "$f"; done
echo "ok: %p: ${files[*]}"

# 3. No stub files: no sample taken (1 Hz over a process that lives milliseconds), or no such event.
LD_PRELOAD=$lib SELFPERF_PROFILE=$tmp/none.data SELFPERF_FREQUENCY=1 /bin/true 2> none.err
[[ -z $(profiles none.data*) ]] || fail "a process without samples left a file: $(ls none.data*)"
grep -q "no samples, no profile written" none.err || fail "no word about the missing profile: $(cat none.err)"
LD_PRELOAD=$lib SELFPERF_PROFILE=$tmp/bad.data SELFPERF_EVENT=no-such-event /bin/true 2> bad.err
[[ -z $(profiles bad.data*) ]] || fail "profiling disabled, yet a file was left: $(ls bad.data*)"
grep -q "profiling disabled" bad.err || fail "no word about the disabled profile: $(cat bad.err)"
echo "ok: no stub file without samples or without the event"

# 4. SELFPERF_QUIET=1: the profile is written, nothing said.
LD_PRELOAD=$lib SELFPERF_PROFILE=$tmp/quiet.data SELFPERF_QUIET=1 bash -c "$burn" 2> quiet.err
[[ -s quiet.data ]] || fail "quiet run wrote no profile"
grep -q "selfperf:" quiet.err && fail "SELFPERF_QUIET=1 still printed: $(cat quiet.err)"
echo "ok: quiet"
