#!/usr/bin/env bash
# selfperf record -o - writes pipe-mode perf.data to standard output: perf script -i - and perf report -i -
# read it from the pipe and name the workload's functions (main_burn, thread_burn_one/two, and the forked
# child's child_burn), while the workload's own standard output went to standard error, not into the stream.
# Also: a terminal as standard output is refused. Usage: check_record_pipe.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$(dirname "$0")/preload_helpers.sh"
preload_setup "${1:?build dir}" bin/selfperf samples/profile_workload
selfperf=$build/bin/selfperf
program=$build/samples/profile_workload
# selfperf record preloads the library into /bin/sh too (the workload's exec'd child).
skip_sanitized "the sanitized preload library cannot be LD_PRELOADed into sh"
need_perf "nothing reads the stream"
export HOME=$tmp   # perf keeps a build-id cache under ~/.debug; nobody's HOME may not be writable

functions="main_burn thread_burn_one thread_burn_two child_burn"

# perf script straight from the pipe.
set +e
"$selfperf" record -o - -- "$program" 200 2> script.err | perf script -i - -F comm,tid,ip,sym > script.txt 2> perf.err
codes=("${PIPESTATUS[@]}")
set -e
[[ ${codes[0]} -eq 0 ]] || { cat script.err; fail "selfperf record -o - exited ${codes[0]}"; }
[[ ${codes[1]} -eq 0 ]] || fail "perf script -i - cannot read the stream: $(head -5 perf.err)"
for fn in $functions; do
  n=$(grep -c -w "$fn" script.txt || true)
  [[ $n -gt 0 ]] || fail "perf script -i - shows no sample in $fn: $(head -5 script.txt)"
  echo "  perf script: $fn $n samples"
done
# The workload's standard output (its exec'd sh echoes a line) reached standard error, not the stream.
grep -q "exec child sees SELFPERF_PROFILE" script.err || fail "the workload's output is not on standard error"
grep -q "wrote pipe-mode perf.data to standard output" script.err || fail "no summary: $(cat script.err)"
grep -q "no .folded/.svg" script.err || fail "the summary does not say that no .folded/.svg were written"
shopt -s nullglob
side=(*.folded *.svg)  # -.folded included
shopt -u nullglob
[[ ${#side[@]} -eq 0 ]] || fail "side files written in pipe mode: ${side[*]}"
echo "ok: perf script -i -: $(grep -c . script.txt) lines, $(grep '^selfperf record: [0-9]' script.err)"

# perf report from a pipe: the burn functions' own time is in spin_for, which they call, so they are found in
# its call graph, by name (perf report in pipe mode has no --children: it sets up its columns before the attrs
# arrive). The stream also goes to a file, read again by selfperf's own reader.
set +e
"$selfperf" record -q -o - -- "$program" 200 2> report.err | tee stream.data | perf report -i - --stdio \
  --sort symbol -g caller > report.txt 2> perf.err
codes=("${PIPESTATUS[@]}")
set -e
[[ ${codes[0]} -eq 0 ]] || { cat report.err; fail "selfperf record -q -o - exited ${codes[0]}"; }
[[ ${codes[2]} -eq 0 ]] || fail "perf report -i - cannot read the stream: $(head -5 perf.err)"
for fn in $functions; do
  grep -E -- "(--| |::)$fn$" report.txt > /dev/null ||
    fail "perf report -i - has no branch for $fn in its call graph: $(grep -v '^#' report.txt | head -30)"
done
echo "ok: perf report -i -: $(grep -E -o -- "--[0-9.]+%--(\(anonymous namespace\)::)?[a-z_]+_burn[a-z_]*$" report.txt |
  head -8 | tr '\n' ' ')"
head -c 16 stream.data | od -A n -t x1 | tr -d ' \n' | grep -q "^50455246494c45321000000000000000$" ||
  fail "the stream does not start with the pipe-mode header (PERFILE2, size 16)"
"$selfperf" report -i - < stream.data > own.txt 2> own.err || fail "selfperf report -i - cannot read it: $(cat own.err)"
grep -q "main_burn" own.txt || fail "selfperf report -i - does not name main_burn: $(head own.txt)"
echo "ok: selfperf report -i - reads the stream"
# Each executable file's build id travels as a HEADER_BUILD_ID record (pipe mode has no BUILD_ID feature).
ids=$(perf report -D -i - < stream.data 2> /dev/null | grep -c "PERF_RECORD_BUILD_ID" || true)
[[ $ids -gt 0 ]] || fail "perf report -D finds no PERF_RECORD_BUILD_ID in the stream"
echo "ok: perf reads $ids build id records"

# A terminal as standard output is refused before the command runs (script(1) gives one, when installed).
if command -v script >/dev/null 2>&1; then
  script -qec "$selfperf record -o - -- true" /dev/null > tty.out 2>&1 || true
  grep -q "standard output is a terminal" tty.out || fail "-o - on a terminal: $(cat tty.out)"
  echo "ok: -o - on a terminal refused"
fi
