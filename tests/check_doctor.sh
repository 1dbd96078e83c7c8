#!/usr/bin/env bash
# selfperf-doctor on this machine: exit 0, a one-line verdict, every live check present in --json.
set -euo pipefail
build=$1
if grep -q '^SELFPERF_SANITIZE:STRING=thread' "$build/CMakeCache.txt"; then
  # TSan defers every signal to its next safe point, so a sample's context is TSan's, not the workload's, and
  # the sampler refuses libunwind there: the unwinding check cannot mean anything in this build.
  echo "skipped: selfperf-doctor's unwinding check is meaningless under ThreadSanitizer (run in plain and ASan builds)"
  exit 77
fi
json=$("$build/bin/selfperf-doctor" --json)
echo "$json"
for check in counters "fast path" sampling unwinding perf.data; do
  grep -q "\"name\":\"$check\"" <<<"$json" || { echo "missing check: $check"; exit 1; }
done
grep -q '"ok":true' <<<"$json"
# No check may fail here; the fast path may be skipped only with its reason.
if grep -q '"result":"fail"' <<<"$json"; then echo "a check failed"; exit 1; fi
"$build/bin/selfperf-doctor" | tail -1 | grep -q "^selfperf-doctor: healthy"
