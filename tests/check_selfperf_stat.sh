#!/usr/bin/env bash
# selfperf stat and selfperf list against the real machine and perf: counts of a deterministic command agree
# with perf stat's, -p follows a running process, exit statuses and bad input behave as perf's do.
set -euo pipefail
build=$1
selfperf=$build/bin/selfperf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 64 MiB of fresh pages plus the interpreter: ~25200 user page faults, +-0.3 % from run to run (address-space
# layout).
workload=(python3 -c "b=b'x'*(64<<20)")
ours=$("$selfperf" stat -x, -e page-faults:u -- "${workload[@]}" 2>&1 | awk -F, '/page-faults/ {print $1}' || true)
if command -v perf >/dev/null; then
  theirs=$(for i in 1 2 3; do perf stat -x, -e page-faults:u -- "${workload[@]}" 2>&1 | awk -F, '/page-faults/ {print $1}'; done | sort -n | sed -n 2p)
  echo "page-faults:u: selfperf stat $ours, perf stat (median of 3) $theirs"
  [[ $ours =~ ^[0-9]+$ && $theirs =~ ^[0-9]+$ ]] || fail "no count: '$ours' '$theirs'"
  (( ours * 100 > theirs * 99 && ours * 100 < theirs * 101 )) || fail "selfperf stat $ours vs perf stat $theirs: more than 1 % apart"
else
  echo "perf not installed: comparing with the known size only"
  (( ours > 16384 )) || fail "page-faults:u $ours < 16384"
fi

# The table perf users know, and the command's exit status passed through.
out=$("$selfperf" stat -e task-clock -- sh -c 'exit 3' 2>&1) && rc=0 || rc=$?
echo "$out"
[ "$rc" = 3 ] || fail "exit status $rc, expected the command's 3"
grep -q "Performance counter stats for 'sh -c exit 3'" <<<"$out" || fail "no header"
grep -q "msec      task-clock" <<<"$out" || fail "no task-clock line"
grep -q "seconds time elapsed" <<<"$out" || fail "no elapsed time"

# -p: attach to a running process; it starts its work only once we are attached (the fd links show it).
mkfifo "$work/go"
python3 -c "import sys; sys.stdin.read(1); b=b'x'*(64<<20)" < "$work/go" &
target=$!
exec 3>"$work/go"
"$selfperf" stat -x, -e page-faults:u -p "$target" > "$work/p.out" 2>&1 &
stat_pid=$!
for _ in $(seq 1 500); do
  ls -l "/proc/$stat_pid/fd" 2>/dev/null | grep -q perf_event && break
  read -t 0.01 <> <(:) || true
done
ls -l "/proc/$stat_pid/fd" | grep -q perf_event || fail "selfperf stat -p never opened its counters"
echo x >&3
exec 3>&-
wait "$target"
wait "$stat_pid" || fail "selfperf stat -p exited $?: $(cat "$work/p.out")"
attached=$(awk -F, '/page-faults/ {print $1}' "$work/p.out")
echo "selfperf stat -p: page-faults:u $attached"
(( attached > 16384 )) || fail "-p counted $attached page faults, fewer than the 16384 pages touched"

# Bad input: one clear line, non-zero status.
out=$("$selfperf" stat -e no-such-event -- true 2>&1) && rc=0 || rc=$?
[ "$rc" = 1 ] && grep -q "no-such-event" <<<"$out" || fail "unknown event: rc $rc, '$out'"
out=$("$selfperf" stat --bogus -- true 2>&1) && rc=0 || rc=$?
[ "$rc" = 2 ] && grep -q "unknown option '--bogus'" <<<"$out" || fail "unknown option: rc $rc, '$out'"
out=$("$selfperf" stat -- /no/such/program 2>&1) && rc=0 || rc=$?
[ "$rc" = 127 ] && grep -q "cannot run /no/such/program" <<<"$out" || fail "missing program: rc $rc, '$out'"
out=$("$selfperf" stat -p 999999999 2>&1) && rc=0 || rc=$?
[ "$rc" = 1 ] && grep -q "999999999" <<<"$out" || fail "missing pid: rc $rc, '$out'"
"$selfperf" stat --help | grep -q "usage: selfperf stat" || fail "no --help"

# list: the software events open everywhere; the hardware group says why it is empty where it is.
out=$("$selfperf" list sw hw)
grep -qx "  task-clock" <<<"$out" || fail "list sw lacks task-clock"
if ! grep -qx "  cycles" <<<"$out"; then
  grep -q "none of .* opens here: " <<<"$out" || fail "empty hw group without a reason"
fi
out=$("$selfperf" list bogus 2>&1) && rc=0 || rc=$?
[ "$rc" = 2 ] && grep -q "unknown group 'bogus'" <<<"$out" || fail "list bogus: rc $rc"
echo "ok"
