#!/usr/bin/env bash
# The user-facing samples run and say what they promise: the read path, the region table, the profile files.
set -euo pipefail
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=$("$build/samples/hot_loop")
echo "$out"
grep -q "^read path: " <<<"$out"
grep -q "task-clock\|cycles" <<<"$out"
grep -q "^    integrate " <<<"$out"  # nested regions, indented under step
out=$("$build/samples/profile_me" "$work/me.data" 1)
echo "$out"
grep -q "samples written" <<<"$out"
grep -q "top functions:" <<<"$out"
test -s "$work/me.data" && test -s "$work/me.data.folded" && test -s "$work/me.data.svg"
# The workload's own functions are on the sampled stacks (as callers: at -O0 the leaves are STL internals).
grep -q "sort_batches" "$work/me.data.folded"
grep -q "count_words" "$work/me.data.folded"
if command -v perf >/dev/null; then
  # Captured first: grep -q would close the pipe early and pipefail would report perf's SIGPIPE.
  report=$(perf report -i "$work/me.data" --stdio 2>/dev/null)
  grep -q "sort_batches" <<<"$report"
fi
out=$("$build/samples/bench_integration" --benchmark_min_time=0.01 --benchmark_filter=BM_FreshPages)
grep -q "page-faults:u=" <<<"$out"
