#!/usr/bin/env bash
# Crash-safe output: a profiled process killed with SIGKILL mid-run (its exit handlers never run), or dying of
# SIGABRT, SIGSEGV or _exit, leaves a perf.data that perf report and perf script read up to the last samples
# written. Fails before the header was kept valid from the start: perf said "incompatible file format".
# Usage: check_profile_crash.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$(dirname "$0")/preload_helpers.sh"
preload_setup "${1:?build dir}" samples/profile_workload
program=$build/samples/profile_workload
need_perf "nothing to read the files with"
worker=
trap '[[ -n $worker ]] && kill -KILL "$worker" 2>/dev/null; rm -rf "$tmp"' EXIT

check_read() {  # what file
  local what=$1 f=$2
  perf report -i "$f" --stdio --sort comm > report.txt 2> report.err || fail "$what: perf report cannot read $f: $(cat report.err)"
  local n
  n=$(sed -n 's/^# Samples: \([0-9]*\).*/\1/p' report.txt | head -1)
  [[ ${n:-0} -gt 0 ]] || fail "$what: perf report shows no samples in $f: $(head -20 report.txt)"
  perf script -i "$f" -F comm,tid,ip > script.txt 2> script.err || fail "$what: perf script cannot read $f: $(cat script.err)"
  [[ -s script.txt ]] || fail "$what: perf script shows no samples in $f"
  echo "ok: $what: $n samples read back from a profile cut short"
}

# SIGKILL, in every build: the program profiles itself (profile_from_env) and burns for minutes; it is killed
# once its file holds a few drain passes of samples (the file grows only as samples are synced).
SELFPERF_PROFILE=$tmp/killed.data SELFPERF_QUIET=1 "$program" --manual 600000 > /dev/null 2>&1 &
worker=$!
for ((i = 0; i < 1200; i++)); do  # waits for the file to grow, at most 2 minutes
  [[ -f killed.data && $(stat -c %s killed.data) -ge 65536 ]] && break
  kill -0 "$worker" 2>/dev/null || fail "the workload exited before it was killed"
  sleep 0.1
done
[[ $(stat -c %s killed.data 2>/dev/null || echo 0) -ge 65536 ]] || fail "killed.data never reached 64 KiB"
kill -KILL "$worker"
wait "$worker" 2>/dev/null || true
worker=
check_read SIGKILL killed.data

if sanitized; then
  echo "note: sanitizer build: the preload library cannot be LD_PRELOADed into bash and python3, abort/segv/_exit part skipped"
  exit 0
fi
burn='for ((i = 0; i < 100000; i++)); do :; done'
for sig in ABRT SEGV; do
  LD_PRELOAD=$lib SELFPERF_PROFILE=$tmp/$sig.data bash -c "$burn; kill -$sig \$\$" 2> /dev/null && fail "bash survived SIG$sig"
  check_read "SIG$sig" "$sig.data"
done
# The interpreter itself, not a shim on PATH that would exec it (whose own profile would take exit.data).
if [[ -x /usr/bin/python3 ]]; then
  LD_PRELOAD=$lib SELFPERF_PROFILE=$tmp/exit.data /usr/bin/python3 -c '
import os
x = 0
for i in range(3000000): x += i
os._exit(3)' 2> /dev/null && fail "python3 did not _exit(3)"
  [[ -z $(ls exit.data.* 2>/dev/null) ]] || fail "_exit: more than one process profiled: $(ls exit.data*)"
  check_read _exit exit.data
fi
