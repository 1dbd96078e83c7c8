#!/usr/bin/env bash
# selfperf-doctor: never aborts, whatever the environment denies (seccomp, an ordinary user, no descriptors),
# names the cause with its fix, and on this machine reports healthy with every live check present in --json.
set -euo pipefail
build=$1
doctor=$build/bin/selfperf-doctor
deny=$build/tests/seccomp_deny
fail() { echo "FAIL: $*"; exit 1; }

# Runs the doctor (args…), keeps its output in $out and its exit status in $rc; 0 and 1 are answers, anything
# else (134 = abort, 139 = crash) is a bug.
run() {
  set +e
  out=$("$@")  # stderr goes to the log: --json output must parse
  rc=$?
  set -e
  echo "--- $* (exit $rc)"
  echo "$out"
  [ "$rc" -eq 0 ] || [ "$rc" -eq 1 ] || fail "exit status $rc from: $*"
}

python_json() {  # python_json <json> <python expression over j>: exit status of the assertion
  python3 -c 'import json,sys; j=json.loads(sys.argv[1]); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2"
}

# --help: usage on stdout, exit 0; a bad argument: exit 2 with the usage.
"$doctor" --help | grep -q -- "--json" || fail "--help does not describe --json"
set +e; "$doctor" --bogus >/dev/null 2>&1; rc=$?; set -e
[ "$rc" -eq 2 ] || fail "a bad argument exits $rc, not 2"

# perf_event_open blocked as Docker's default seccomp profile blocks it (EPERM) and as older profiles and
# sandboxes do (ENOSYS): an answer naming seccomp and the remedy, not an abort.
for err in ENOSYS EPERM; do
  run "$deny" "$err" "$doctor"
  [ "$rc" -eq 1 ] || fail "perf_event_open blocked ($err) but the doctor exits $rc"
  grep -q "seccomp" <<<"$out" || fail "the $err diagnosis does not name seccomp"
  grep -q -- "--cap-add PERFMON" <<<"$out" || fail "the $err diagnosis gives no remedy"
  run "$deny" "$err" "$doctor" --json
  python_json "$out" "j['ok'] is False and j['perf_event_open_errno'] == '$err' and j['seccomp_mode'] == 2 \
    and all(c['result'] != 'pass' or c['name'] == 'fast path' for c in j['checks']) \
    and all(c['fix'] for c in j['checks'] if c['result'] == 'fail')" || fail "--json under seccomp ($err)"
done

# Almost no descriptors: the dynamic loader needs one, a group of two events does not fit. Descriptors the
# test runner passes down (ctest's pipes) are closed first, or the limit would leave the loader none.
sanitizers=$(sed -n 's/^SELFPERF_SANITIZE:STRING=//p' "$build/CMakeCache.txt")
if [ -n "$sanitizers" ]; then
  # UBSan's vptr check needs a descriptor of its own: with none free it stops the program at its first virtual
  # call, whatever the program does. Sanitizer runtimes are left out; the plain build runs this, as root and as
  # nobody.
  echo "skipped the ulimit -n 4 run under -fsanitize=$sanitizers"
else
  run bash -c 'for fd in /proc/$$/fd/*; do n=${fd##*/}; [ "$n" -le 2 ] || eval "exec $n>&-"; done
               ulimit -n 4 && exec "$0" --json' "$doctor"
  python_json "$out" "[e for e in j['environment'] if e['name'] == 'file descriptor limit' and not e['ok'] \
    and 'ulimit -n' in e['fix']] and all('ulimit -n' in c['fix'] for c in j['checks'] if c['result'] == 'fail')" \
    || fail "out of descriptors without the ulimit -n fix"
fi

# As an ordinary user (perf_event_paranoid 2 here): kernel-side counting is refused, with the fix beside it.
if [ "$(id -u)" -eq 0 ]; then
  as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  if ! "${as_user[@]}" test -x "$doctor"; then
    echo "skipped the ordinary-user run: nobody cannot reach $doctor (the suite's nobody pass runs it)"
    as_user=()
  fi
else
  as_user=(env)
fi
paranoid=$(cat /proc/sys/kernel/perf_event_paranoid)
if [ ${#as_user[@]} -gt 0 ]; then
  run "${as_user[@]}" "$doctor" --json
  if [ "$paranoid" -ge 2 ]; then
    python_json "$out" "[e for e in j['environment'] if e['name'] == 'kernel-side counting' and not e['ok'] \
      and 'perf_event_paranoid=1' in e['fix'] and 'cap_perfmon' in e['fix']]" \
      || fail "as an ordinary user at perf_event_paranoid $paranoid: kernel-side counting not 'no' with its fix"
  fi
  python_json "$out" "all(e['fix'] for e in j['environment'] if not e['ok'])" || fail "a 'no' without its fix"
fi

if grep -q '^SELFPERF_SANITIZE:STRING=thread' "$build/CMakeCache.txt"; then
  # TSan defers every signal to its next safe point, so a sample's context is TSan's, not the workload's, and
  # the sampler refuses libunwind there: the unwinding check cannot mean anything in this build.
  echo "skipped the healthy-machine run: selfperf-doctor's unwinding check is meaningless under ThreadSanitizer"
  exit 0
fi
json=$("$doctor" --json)
echo "$json"
python_json "$json" "[c['name'] for c in j['checks']] == ['counters', 'fast path', 'sampling', 'unwinding', 'perf.data']" \
  || fail "missing checks"
# No check may fail here; the fast path may be skipped only with its reason.
python_json "$json" "j['ok'] is True and all(c['result'] != 'fail' for c in j['checks'])" || fail "a check failed"
python_json "$json" "all(e['fix'] for e in j['environment'] if not e['ok'])" || fail "a 'no' without its fix"
# Frame-pointer stacks are short through code without frame pointers: the advice comes with them.
python_json "$json" "any(c['name'] == 'unwinding' and '-fno-omit-frame-pointer' in c['fix'] for c in j['checks'])" \
  || fail "no unwinder advice"
"$doctor" | tail -1 | grep -q "^selfperf-doctor: healthy"
