#!/usr/bin/env bash
# selfperf record -p attaches to a running process (record_pid_target, built with frame pointers): a thread it
# had at the attach and one it starts afterwards are both sampled with their callers; perf report and perf
# script read the file with both tids and the known functions; our .folded agrees on the top functions. A
# process the target forks and that execs under another name is followed (its samples, named by the new
# name), and is not with --no-inherit. Then --duration and SIGINT end a recording, and a bad pid gives one
# clear line.
# Usage: check_record_pid.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
selfperf="$build/bin/selfperf"
target="$build/tests/record_pid_target"
source "${2:?source dir}/tests/record_pid_helpers.sh"
# The target's SIGUSR1 handler is installed (SigCgt bit 10): the signal then starts its second thread.
catches_usr1() { local m; m=$(awk '/^SigCgt:/ {print $2}' "/proc/$1/status" 2>/dev/null) && (( 0x$m & 0x200 )); }
attached() { grep -qs "^selfperf record: sampling" "$1"; }

# 1. The whole run: attach, then the target starts its second thread, which works a fixed amount once record
# has opened an event on it, and exits; record stops by itself.
"$target" late.tid 10000 &
tpid=$!; pids+=("$tpid")
wait_for "the target's SIGUSR1 handler" catches_usr1 "$tpid"
"$selfperf" record -p "$tpid" -o run.data 2> run.err &
rpid=$!; pids+=("$rpid")
wait_for "selfperf record to attach" attached run.err
kill -USR1 "$tpid"
# The second thread exists, and record has an event on it too (one per thread): then it may finish its work.
wait_for "the target's second thread" test -s late.tid
# One event per thread: the threads at the attach (a sanitizer's runtime may have one of its own) plus this one.
at_attach=$(sed -n 's/^selfperf record: sampling 1 process (\([0-9]*\) threads).*/\1/p' run.err)
[[ $at_attach =~ ^[0-9]+$ ]] || fail "no thread count in the attach line: $(cat run.err)"
perf_fds() { (( $(ls -l "/proc/$rpid/fd" 2>/dev/null | grep -c 'perf_event') >= at_attach + 1 )); }
wait_for "selfperf record to follow the second thread" perf_fds
kill -USR2 "$tpid"
wait "$rpid" || { cat run.err; fail "selfperf record -p exited $?"; }
wait "$tpid" || fail "the target exited $?"
cat run.err
grep -q "every process exited" run.err || fail "record did not stop because the process exited: $(cat run.err)"
late=$(cat late.tid)
[[ $late =~ ^[0-9]+$ && $late != "$tpid" ]] || fail "the target's second thread wrote no tid: '$late'"

perf script -i run.data -F tid,ip,sym > script.txt 2> script.err || fail "perf script cannot read run.data: $(cat script.err)"
# Each sample: a line with its tid (right-aligned), then its frames, leaf first, each after a tab; print tid,
# leaf and caller.
awk '/^\t/ { n++; if (n == 1) leaf = $2; else if (n == 2) caller = $2; next }
     NF >= 1 { if (tid != "") print tid, leaf, caller; tid = $1; leaf = ""; caller = ""; n = 0 }
     END { if (tid != "") print tid, leaf, caller }' script.txt > stacks.txt
main_n=$(awk -v t="$tpid" '$1 == t && $2 == "main_spin_leaf" && $3 == "main_spin_caller"' stacks.txt | wc -l)
late_n=$(awk -v t="$late" '$1 == t && $2 == "late_spin_leaf" && $3 == "late_spin_caller"' stacks.txt | wc -l)
echo "perf script: $(wc -l < stacks.txt) samples; main thread $tpid: $main_n in main_spin_leaf <- main_spin_caller;" \
     "late thread $late: $late_n in late_spin_leaf <- late_spin_caller"
[[ $main_n -gt 0 ]] || fail "perf script shows no sample of thread $tpid in main_spin_leaf called by main_spin_caller: $(sort stacks.txt | uniq -c | sort -rn | head)"
[[ $late_n -gt 0 ]] || fail "perf script shows no sample of the thread started after the attach ($late) in late_spin_leaf called by late_spin_caller: $(sort stacks.txt | uniq -c | sort -rn | head)"

# perf's "pid" sort key is the thread: tid:comm.
perf report -i run.data --stdio --sort pid > report.txt 2> report.err || fail "perf report cannot read run.data: $(cat report.err)"
grep -Eq "^ +[0-9.]+% .* $tpid:record_pid_targ\$" report.txt ||
  fail "perf report --sort pid has no line for the main thread $tpid: $(grep '%' report.txt | head)"
grep -Eq "^ +[0-9.]+% .* $late:record_pid_targ\$" report.txt ||
  fail "perf report --sort pid has no line for the late thread $late (named like its process): $(grep '%' report.txt | head)"

# The top two functions: perf's (self time, symbols) and ours (leaves of the folded stacks) are the two leaves.
perf report -i run.data --stdio --no-children --sort sym > sym.txt 2> /dev/null || fail "perf report --sort sym failed"
theirs=$(grep -E '^ +[0-9.]+%' sym.txt | head -2 | awk '{print $NF}' | sort | tr '\n' ' ')
[[ -s run.data.folded && -s run.data.svg ]] || fail "run.data.folded or run.data.svg missing"
ours=$(awk '{ n = $NF; $NF = ""; k = split($0, f, ";"); sub(/ +$/, "", f[k]); c[f[k]] += n }
            END { for (s in c) print c[s], s }' run.data.folded | sort -rn | head -2 | awk '{print $2}' | sort | tr '\n' ' ')
echo "top two: perf report '$theirs', ours '$ours'"
[[ $theirs == "late_spin_leaf main_spin_leaf " ]] || fail "perf report's top functions are '$theirs': $(head -20 sym.txt)"
[[ $ours == "$theirs" ]] || fail "our folded stacks' top functions '$ours' differ from perf report's '$theirs'"
grep -q "late_spin_caller;late_spin_leaf" run.data.folded || fail "no late_spin_caller;late_spin_leaf stack in run.data.folded"
grep -q "^record_pid_targ;" run.data.folded || fail "the folded stacks have no root naming the process"

# 1b. A process forked after the attach, which execs this target under another name (so its COMM changes):
# followed from its FORK, its samples named forked_child in child_spin_leaf <- child_spin_caller; record ends
# when both have exited. record is stopped (SIGSTOP) from before the fork until the child has exec'd, so that
# the FORK is read after the exec, which then left no COMM or MMAP2 in any ring: record takes them from /proc.
# The child works a fixed amount only once record has an event on it.
ln -s "$target" forked_child
fork_run() {  # output file, then selfperf record options
  local out=$1; shift
  rm -f child.pid
  "$target" --fork "$tmp/forked_child" child.pid 3000 &
  fpid=$!; pids+=("$fpid")
  wait_for "the forking target's SIGUSR1 handler" catches_usr1 "$fpid"
  "$selfperf" record -p "$fpid" -o "$out" "$@" 2> "$out.err" &
  rpid=$!; pids+=("$rpid")
  wait_for "selfperf record to attach to the forking target" attached "$out.err"
  at_attach=$(sed -n 's/^selfperf record: sampling 1 process (\([0-9]*\) threads).*/\1/p' "$out.err")
  kill -STOP "$rpid"
  kill -USR1 "$fpid"
  wait_for "the forked child's pid file" test -s child.pid  # written after the exec
  child=$(cat child.pid)
  kill -CONT "$rpid"
}
fork_run fork.data
wait_for "selfperf record to follow the forked process" perf_fds
kill -USR2 "$child"
wait "$rpid" || { cat fork.data.err; fail "selfperf record -p (fork) exited $?"; }
wait "$fpid" || fail "the forking target exited $?"
cat fork.data.err
grep -q "every process exited" fork.data.err || fail "fork: record did not wait for both processes: $(cat fork.data.err)"
# At least the child: under ASan, LeakSanitizer's tracer at the child's exit is a process too.
grep -Eq "^  [1-9][0-9]* processes they started were followed" fork.data.err || fail "fork: no followed process in the summary"
perf script -i fork.data -F comm,pid,ip,sym > fork.txt 2> fork.script.err || fail "perf script cannot read fork.data: $(cat fork.script.err)"
awk '/^\t/ { n++; if (n == 1) leaf = $2; else if (n == 2) caller = $2; next }
     NF >= 1 { if (head != "") print head, leaf, caller; head = $1 " " $2; leaf = ""; caller = ""; n = 0 }
     END { if (head != "") print head, leaf, caller }' fork.txt > fork.stacks
child_n=$(awk -v p="$child" '$1 == "forked_child" && $2 == p && $3 == "child_spin_leaf" && $4 == "child_spin_caller"' fork.stacks | wc -l)
echo "fork: child $child: $child_n samples named forked_child in child_spin_leaf <- child_spin_caller"
[[ $child_n -gt 0 ]] || fail "fork: perf script has no sample of the forked child $child named forked_child in child_spin_leaf <- child_spin_caller: $(sort fork.stacks | uniq -c | sort -rn | head)"
perf report -i fork.data --stdio --no-children --sort comm > fork.report 2> /dev/null || fail "perf report --sort comm cannot read fork.data"
grep -Eq "^ +[0-9.]+% +forked_child *\$" fork.report || fail "fork: perf report --sort comm has no forked_child: $(grep '%' fork.report | head)"
# --no-inherit: the same fork, not followed; record still ends with the target.
fork_run nofork.data --no-inherit
kill -USR2 "$child"
wait "$rpid" || { cat nofork.data.err; fail "selfperf record -p --no-inherit exited $?"; }
wait "$fpid" || fail "the forking target exited $?"
grep -q "followed" nofork.data.err && fail "--no-inherit followed a process: $(cat nofork.data.err)"
n=$(perf script -i nofork.data -F pid 2> /dev/null | awk -v p="$child" '$1 == p' | wc -l)
[[ $n == 0 ]] || fail "--no-inherit: $n samples of the forked child $child"
echo "ok: --no-inherit: the forked child not sampled"

# 2. --duration ends a recording of a process that keeps running; SIGINT ends another one.
"$target" never.tid 0 &
spid=$!; pids+=("$spid")
wait_for "the second target's SIGUSR1 handler" catches_usr1 "$spid"
"$selfperf" record -p "$spid" --duration 0.5 -F 499 -e task-clock -o dur.data 2> dur.err || { cat dur.err; fail "--duration: exit $?"; }
grep -q "duration reached" dur.err || fail "--duration: $(cat dur.err)"
perf report -i dur.data --stdio --no-children --sort sym 2> /dev/null | grep -q main_spin_leaf || fail "--duration: no main_spin_leaf in dur.data"
perf report -i dur.data --stdio --header-only 2> /dev/null | grep -q task-clock || fail "-e task-clock: the file names another event"
echo "ok: --duration 0.5: $(grep -o '[0-9]* samples' dur.err)"
"$selfperf" record -p "$spid" -o int.data 2> int.err &
rpid=$!; pids+=("$rpid")
wait_for "selfperf record to attach again" attached int.err
kill -INT "$rpid"
wait "$rpid" || { cat int.err; fail "SIGINT: exit $?"; }
grep -q "interrupted (SIGINT)" int.err || fail "SIGINT: $(cat int.err)"
# Written even empty: SIGINT may come before the first sample (0.00 s after the attach under ASan as nobody).
[[ -e int.data.folded ]] || fail "SIGINT: no int.data.folded"
echo "ok: SIGINT: $(grep -o '[0-9]* samples' int.err)"
kill -9 "$spid"; wait "$spid" 2>/dev/null || true

# 3. Bad input: one clear line and a non-zero exit.
true & dead=$!; wait "$dead"
while [[ -e /proc/$dead ]]; do dead=$((dead + 1)); done  # a pid nothing runs under
out=$("$selfperf" record -p "$dead" -o bad.data 2>&1) && rc=0 || rc=$?
echo "bad pid: rc $rc: $out"
[[ $rc == 1 && $(wc -l <<<"$out") == 1 ]] || fail "bad pid $dead: rc $rc, '$out'"
grep -q "process $dead: no such process" <<<"$out" || fail "bad pid: the message does not name it: '$out'"
out=$("$selfperf" record -p 12x 2>&1) && rc=0 || rc=$?
[[ $rc == 2 ]] && grep -q "\-p 12x: give process ids" <<<"$out" || fail "-p 12x: rc $rc, '$out'"
"$selfperf" record --help | grep -q -- "-p PID\[,PID...\]" || fail "record --help does not describe -p"
echo "ok"
