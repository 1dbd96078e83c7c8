#!/usr/bin/env bash
# selfperf record profiles a whole process tree into one perf.data: a fork+exec chain (bash starting bash
# starting bash), a wrapper chain (sh -c running timeout running env exec'ing bash) and a forked subshell; perf report --sort
# comm,pid and perf script show every process of it with samples, and the summary names them.
# Usage: check_record_tree.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source "$(dirname "$0")/preload_helpers.sh"
preload_setup "${1:?build dir}" bin/selfperf
selfperf=$build/bin/selfperf
skip_sanitized "the sanitized preload library cannot be LD_PRELOADed into sh and bash"
need_perf "nothing to check the file with"

# Each bash of the chain notes its pid, burns CPU (dozens of samples at 999 Hz anywhere), and starts the next
# one with fork+exec (the command is not the script's last, so bash cannot exec it in place).
cat > chain.sh <<'SCRIPT'
echo $$ >> "$PIDS"
for ((i = 0; i < 100000; i++)); do :; done
if (($1 > 0)); then bash "$0" $(($1 - 1)); fi
true
SCRIPT

check_tree() {  # name data-file pids-file expected-process-count
  local name=$1 data=$2 pids=$3 want=$4
  [[ $(wc -l < "$pids") -eq $want ]] || fail "$name: $want processes expected to run, $(wc -l < "$pids") did"
  perf report -i "$data" --sort comm,pid --stdio > report.txt 2> report.err ||
    fail "$name: perf report cannot read $data: $(cat report.err)"
  perf script -i "$data" -F comm,pid > script.txt 2> script.err || fail "$name: perf script cannot read $data: $(cat script.err)"
  local pid n
  while read -r pid; do
    grep -Eq "^ +[0-9.]+% +[0-9.]+% +bash +$pid:bash" report.txt ||
      fail "$name: perf report --sort comm,pid has no line for bash $pid: $(grep '%' report.txt | head -20)"
    n=$(awk -v p="$pid" '$1 == "bash" && $2 == p' script.txt | wc -l)
    [[ $n -gt 0 ]] || fail "$name: perf script shows no sample of bash $pid"
    echo "  bash $pid: $n samples"
  done < "$pids"
  [[ -s $data.folded && -s $data.svg ]] || fail "$name: $data.folded or $data.svg missing"
  grep -q "^bash;" "$data.folded" || fail "$name: the folded stacks have no bash root"
}

export PIDS=$tmp/fork.pids
"$selfperf" record -o fork.data -- bash chain.sh 2 2> fork.err ||
  { cat fork.err; fail "fork+exec chain: selfperf record failed"; }
grep -Eq "^selfperf record: [0-9]+ processes, [0-9]+ threads, [0-9]+ samples, [0-9]+ lost" fork.err ||
  fail "no summary line: $(cat fork.err)"
grep -q "wrote fork.data" fork.err || fail "the summary does not say where the file is: $(cat fork.err)"
echo "ok: fork+exec chain, $(grep '^selfperf record: [0-9]' fork.err)"
check_tree "fork+exec chain" fork.data fork.pids 3

export PIDS=$tmp/wrap.pids
"$selfperf" record -o wrap.data -F 499 -e task-clock -- \
  sh -c 'timeout 300 env bash chain.sh 0; true' 2> wrap.err || { cat wrap.err; fail "wrapper chain: selfperf record failed"; }
echo "ok: wrapper chain, $(grep '^selfperf record: [0-9]' wrap.err)"
check_tree "wrapper chain" wrap.data wrap.pids 1
grep -q "task-clock" report.txt || fail "-e task-clock: the report names another event: $(grep Samples report.txt)"

# A process killed by SIGKILL runs no exit handler: its samples, streamed to its file, still reach the flame
# graph, which record draws from the merged perf.data (the processes' own stacks died with them).
cp "$(command -v bash)" spinner
"$selfperf" record -o kill.data -- \
  bash -c './spinner -c "while :; do :; done" & s=$!; sleep 1; kill -9 $s; wait; true' 2> kill.err ||
  { cat kill.err; fail "killed process: selfperf record failed"; }
spun=$(awk -F';' '$1 == "spinner" { split($NF, c, " "); n += c[length(c)] } END { print n + 0 }' kill.data.folded)
[[ $spun -gt 0 ]] || fail "the process killed by SIGKILL is not in the flame graph: $(cut -c1-60 kill.data.folded | sort | uniq -c | head)"
echo "ok: killed process: $spun samples under spinner in kill.data.folded"

# Fork without exec: a bash subshell burns in a forked copy of its parent.
"$selfperf" record -o sub.data -- \
  bash -c '(echo $BASHPID > sub.pid; for ((i = 0; i < 100000; i++)); do :; done) & wait; true' 2> sub.err ||
  { cat sub.err; fail "forked subshell: selfperf record failed"; }
sub=$(cat sub.pid)
n=$(perf script -i sub.data -F comm,pid 2> /dev/null | awk -v p="$sub" '$1 == "bash" && $2 == p' | wc -l)
[[ $n -gt 0 ]] || fail "forked subshell $sub: no sample: $(cat sub.err)"
echo "ok: forked subshell $sub: $n samples, $(grep '^selfperf record: [0-9]' sub.err)"

# A program without frame pointers (Debian's python3): the default unwinding reaches main in most samples
# (95 % here, as perf record --call-graph dwarf's 99 %); frame pointers gave leaves only (0 %).
if [[ -x /usr/bin/python3 ]]; then
  "$selfperf" record -q -o py.data -- /usr/bin/python3 -c '
x = 0
for i in range(2000000): x += i' || fail "python3: selfperf record failed"
  awk '{ n = $NF; total += n; if (/;Py_BytesMain;/) main += n }
       END { printf "%d %d\n", main, total; exit !(total > 0 && main >= 0.5 * total) }' py.data.folded > py.share ||
    fail "python3: stacks reaching Py_BytesMain: $(cat py.share) (main, total samples): no DWARF unwinding"
  echo "ok: python3 without frame pointers: $(cut -d' ' -f1 py.share) of $(cut -d' ' -f2 py.share) samples reach Py_BytesMain"
fi

# An exec in place: bash takes samples, then becomes python3 (the same pid). The merged file marks python3's
# name as an exec, so its stacks are named by its own mappings: before, the old image's libc hid the new one's
# from our symbolizer and every python3 stack went through `[libc.so.6]` (check_unwind_vs_perf failed so).
if [[ -x /usr/bin/python3 ]]; then
  "$selfperf" record -q -o exec.data -- bash -c 'for ((i = 0; i < 100000; i++)); do :; done
exec /usr/bin/python3 -c "
x = 0
for i in range(2000000): x += i"' || fail "exec in place: selfperf record failed"
  awk -F';' '{ n = split($NF, last, " "); c = last[n] }
       $1 == "bash" { b += c } $1 == "python3" { p += c; if (/;__libc_start_main;/) named += c }
       END { printf "%d %d %d\n", b, p, named; exit !(b > 0 && p > 0 && named >= 0.9 * p) }' exec.data.folded > exec.share ||
    fail "exec in place: bash, python3 samples and python3's reaching __libc_start_main by name: $(cat exec.share); $(grep -o '\[libc[^;]*\]' exec.data.folded | sort | uniq -c)"
  pid_images=$(perf script -i exec.data -F comm,pid 2> /dev/null | awk '{ print $2 }' | sort -u | wc -l)
  [[ $pid_images -eq 1 ]] || fail "exec in place: bash and python3 should be one pid, perf script shows $pid_images"
  echo "ok: exec in place: bash $(cut -d' ' -f1 exec.share) samples, then python3 $(cut -d' ' -f2 exec.share), $(cut -d' ' -f3 exec.share) of them through __libc_start_main by name"
fi

# The command's exit status is selfperf record's.
status=0
"$selfperf" record -q -o fail.data -- sh -c 'exit 7' 2> /dev/null || status=$?
[[ $status -eq 7 ]] || fail "exit status 7 of the command came back as $status"
"$selfperf" record -o x.data 2> usage.err && fail "no command accepted"
grep -q "give the command" usage.err || fail "no usage message: $(cat usage.err)"
echo "ok: exit status and usage"
