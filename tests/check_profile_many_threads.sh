#!/usr/bin/env bash
# A thousand threads, all alive and most of them runnable on a machine with a few CPUs, profiled by the preload
# library: the program finishes, at most one line says that threads went unsampled (as an ordinary user the
# locked-memory allowance for ring buffers runs out), and no thread is reported as blocking or not taking the
# signal: a thread preempted inside the handler, or with its signal pending, for over a second was (the kernel
# masks the signal while its handler runs). The summary counts the sampled threads. Memory: bench_profile_cost.
# Usage: check_profile_many_threads.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$(dirname "$0")/preload_helpers.sh"
preload_setup "${1:?build dir}" tests/many_threads
program=$build/tests/many_threads
skip_sanitized "a thousand sanitized threads under the sampler take minutes here"

LD_PRELOAD=$lib SELFPERF_PROFILE="$tmp/out.data" "$program" 1000 20 > stdout.txt 2> stderr.txt ||
  fail "the program failed: $(tail -5 stderr.txt)"
grep -q "^threads 1000 " stdout.txt || fail "the program did not finish its threads: $(cat stdout.txt)"
unsampled=$(grep -c "not sampled" stderr.txt || true)
(( unsampled <= 1 )) || fail "$unsampled lines about unsampled threads (one expected at most): $(grep "not sampled" stderr.txt | head -3)"
if grep -E "blocks signal|never took|installed its own handler" stderr.txt; then
  fail "a thread that only waited for a CPU was reported as not taking the signal"
fi
summary=$(grep "^selfperf: many_threads\[" stderr.txt) || fail "no summary line: $(tail -3 stderr.txt)"
threads=$(sed -E 's/.* ([0-9]+) threads?,.*/\1/' <<< "$summary")
(( threads >= 100 )) || fail "only $threads threads sampled: $summary"
[[ -s out.data ]] || fail "no profile written"
echo "ok: $(cat stdout.txt); $summary; unsampled lines: $unsampled"
