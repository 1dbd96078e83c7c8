#!/usr/bin/env bash
# The profiler's summary as JSON, from outside the program: SELFPERF_SUMMARY under the preload library (one file
# per process, %p the pid, written with SELFPERF_QUIET too) and selfperf record --summary-json for a process
# tree. Each count is checked against perf script's count of the samples in the file the summary names.
# Usage: check_profile_summary.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$(dirname "$0")/preload_helpers.sh"
preload_setup "${1:?build dir}" bin/selfperf
selfperf=$build/bin/selfperf
skip_sanitized "the sanitized preload library cannot be LD_PRELOADed into bash"
need_perf "nothing to check the counts with"
command -v python3 >/dev/null 2>&1 || fail "python3 missing (setup.sh installs it)"
export HOME=$tmp
json() {  # json FILE EXPRESSION-over-j: prints the value
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
samples_in() { perf script -i "$1" -F tid 2>/dev/null | wc -l; }

# Preload: a bash that burns, then a child bash (fork+exec) that burns: two summaries, each naming its pid.
LD_PRELOAD=$lib SELFPERF_PROFILE=$tmp/pre.data SELFPERF_SUMMARY=$tmp/pre.%p.json SELFPERF_QUIET=1 bash -c \
  'for ((i = 0; i < 100000; i++)); do :; done; bash -c "for ((i = 0; i < 100000; i++)); do :; done"; true' \
  2> pre.err || { cat pre.err; fail "preload run failed"; }
[[ ! -s pre.err ]] || fail "SELFPERF_QUIET=1 yet stderr says: $(cat pre.err)"
shopt -s nullglob
# The forked bash's image before its exec writes one too when it took a sample there: its exec'd image's is
# then pre.<pid>.json.1, as its profile is pre.data.<pid>.1.
summaries=(pre.*.json pre.*.json.*)
[[ ${#summaries[@]} -ge 2 ]] || fail "2 summaries or more expected (bash and its child), found: ${summaries[*]}"
for s in "${summaries[@]}"; do
  pid=${s#pre.}; pid=${pid%%.*}
  [[ $(json "$s" "j['format']") == selfperf-profile-summary ]] || fail "$s: wrong format"
  [[ $(json "$s" "j['pid']") == "$pid" ]] || fail "$s: pid $(json "$s" "j['pid']"), not $pid"
  [[ $(json "$s" "j['written']") == True ]] || fail "$s: no profile written"
  data=$(json "$s" "j['files']['perf_data']")
  [[ -s $data && -s $data.folded && -s $data.svg ]] || fail "$s names $data, which is missing"
  want=$(samples_in "$data")
  [[ $(json "$s" "j['samples']") -eq $want && $want -gt 0 ]] ||
    fail "$s: $(json "$s" "j['samples']") samples, perf script counts $want in $data"
  [[ $(json "$s" "sum(t['samples'] for t in j['per_thread'])") -eq $((want + $(json "$s" "j['samples_dropped']"))) ]] ||
    fail "$s: per-thread samples do not add up to $want"
  echo "ok: preload: $s: $want samples, as in $data"
done

# selfperf record: the same tree; the run's summary totals what perf script counts in the merged file.
"$selfperf" record -q -o rec.data --summary-json rec.json -- bash -c \
  'for ((i = 0; i < 100000; i++)); do :; done; bash -c "for ((i = 0; i < 100000; i++)); do :; done"; exit 3' \
  2> rec.err && fail "record did not pass on the command's exit status 3"
[[ -s rec.json ]] || fail "record wrote no rec.json: $(cat rec.err)"
[[ $(json rec.json "j['format']") == selfperf-record-summary ]] || fail "rec.json: wrong format"
[[ $(json rec.json "j['exit_status']") -eq 3 ]] || fail "rec.json: exit_status $(json rec.json "j['exit_status']")"
want=$(samples_in rec.data)
[[ $(json rec.json "j['samples']") -eq $want && $want -gt 0 ]] ||
  fail "rec.json: $(json rec.json "j['samples']") samples, perf script counts $want in rec.data"
[[ $(json rec.json "j['processes']") -ge 2 && $(json rec.json "j['processes'] == len(j['per_process'])") == True ]] ||
  fail "rec.json: 2 processes or more expected, each with its summary: $(cat rec.json)"
[[ $(json rec.json "j['processes_without_summary']") -eq 0 ]] || fail "rec.json: a process without summary"
[[ $(json rec.json "sum(p['samples'] for p in j['per_process'])") -eq $want ]] ||
  fail "rec.json: the processes' samples do not add up to $want"
[[ $(json rec.json "j['files']['perf_data']") == rec.data ]] || fail "rec.json: files.perf_data is not rec.data"
lost_ok="j['lost']['total'] >= j['lost']['buffer_full'] + j['lost']['kernel'] + j['lost']['coalesced']"
[[ $(json rec.json "$lost_ok") == True ]] ||
  fail "rec.json: losses by cause exceed the total"
echo "ok: record --summary-json: $want samples in $(json rec.json "j['processes']") processes, exit status 3 kept"

# Nothing sampled: record's summary is still written, saying so; a process summary cut short (here forged
# beside the others) is named on stderr and left out, not fatal.
"$selfperf" record -q -F 1 -o none.data --summary-json none.json -- bash -c \
  'printf "{\"format\":\"selfperf-profile-summary\",\"samples\":" > "${SELFPERF_SUMMARY%/*}/cut.json"' \
  2> none.err || fail "record failed: $(cat none.err)"
[[ -s none.json ]] || fail "no none.json for a run without samples: $(cat none.err)"
[[ $(json none.json "j['samples']") -eq 0 && $(json none.json "j['files']['perf_data']") == None ]] ||
  fail "none.json: $(cat none.json)"
grep -q "cut.json is no profiler summary" none.err || fail "the cut summary was not named: $(cat none.err)"
echo "ok: record --summary-json without samples writes a summary saying so; a cut summary is left out"
