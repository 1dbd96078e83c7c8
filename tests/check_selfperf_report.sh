#!/usr/bin/env bash
# selfperf report and selfperf dump on files and pipe-mode streams written by the real perf record: the top
# functions agree with perf report's, the sample counts with perf report -D's, bad input gives one line.
set -euo pipefail
build=$(realpath "$1")
selfperf=$build/bin/selfperf
command -v perf >/dev/null || { echo "skipped: perf is not installed (apt-get install linux-perf)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }

workload=(python3 -c "
def work():
    s = 0
    for i in range(3000000): s += i * i
    return s
work()")
perf record -q -e cpu-clock:u -F 999 -g -o py.data -- "${workload[@]}" 2>/dev/null \
  || { echo "skipped: perf record cannot record here"; exit 77; }

"$selfperf" report -i py.data -n 100 --folded py.folded --svg py.svg > ours.txt
cat ours.txt
# perf report's three hottest named functions (its [.] rows, self, with -n sample counts) have the same
# number of self samples in our table (compared by name, so that ties may sort either way; perf's
# percentages weigh samples by period, ours count them). Only functions with 5 samples or more: below that
# perf's order among equal counts is arbitrary, and one such pick was a PLT stub, which perf names "@plt"
# (or "free@plt") from the relocations and we by its FDE, as any code without a symbol.
perf report -i py.data -n --stdio --no-children --sort sym 2>/dev/null | grep -E '^ +[0-9.]+% +[0-9]+ +\[\.\] ' \
  | awk '$4 !~ /^0x/ && $4 !~ /@plt$/ && $2 >= 5 {print $4, $2}' | head -3 > perf_top.txt || true
[ -s perf_top.txt ] || fail "perf report shows no named function"
while read -r name samples; do
  ours=$(awk -v f="$name" 'NR > 2 && $5 == f {print $3; exit}' ours.txt)
  echo "$name: perf report $samples self samples, selfperf report ${ours:-absent}"
  [ -n "$ours" ] || fail "$name missing from selfperf report"
  (( ours >= samples - 1 && ours <= samples + 1 )) || fail "$name: $ours self samples vs perf's $samples"
done < perf_top.txt
ours_top=$(head -1 perf_top.txt | cut -d' ' -f1)
grep -q "$ours_top" py.folded || fail "folded stacks lack $ours_top"
grep -q "<svg" py.svg || fail "no SVG"
# pprof: go tool pprof (Debian golang-go) reads our profile.proto with the same self samples per function.
"$selfperf" report -i py.data --pprof py.pb.gz > /dev/null
if command -v go >/dev/null; then
  HOME=$work GOCACHE=$work/gocache GOFLAGS= go tool pprof -top -sample_index=samples -nodecount=200 py.pb.gz \
    > pprof.txt 2>&1 || fail "go tool pprof cannot read the profile: $(cat pprof.txt)"
  while read -r name samples; do
    flat=$(awk -v f="$name" '$6 == f {print $1; exit}' pprof.txt)
    echo "$name: go tool pprof ${flat:-absent} flat samples, perf report $samples"
    [ -n "$flat" ] && (( flat >= samples - 1 && flat <= samples + 1 )) || fail "pprof disagrees on $name"
  done < perf_top.txt
else
  echo "pprof check skipped: go is not installed (apt-get install golang-go)"
fi
"$selfperf" report -i py.data --sort comm | grep -q "python3" || fail "--sort comm lacks python3"

# Pipe mode: perf record -o - into selfperf through a pipe, and perf's own count of the same stream.
perf record -q -e cpu-clock:u -F 999 -g -o - -- "${workload[@]}" 2>/dev/null | tee stream.data \
  | "$selfperf" dump - > dump.txt
theirs=$(perf report -D -i stream.data 2>/dev/null | grep -c "PERF_RECORD_SAMPLE(" || true)
grep -q "^# [0-9]* records, $theirs samples" dump.txt || fail "selfperf dump - read $(tail -1 dump.txt), perf $theirs samples"
"$selfperf" report -i - -n 3 < stream.data | grep -q "^# $theirs samples" || fail "report -i - disagrees with perf's $theirs samples"
echo "pipe mode: $theirs samples read from a pipe by dump and report"

# Bad input.
out=$("$selfperf" report -i /no/such.data 2>&1) && rc=0 || rc=$?
[ "$rc" = 1 ] && grep -q "/no/such.data" <<<"$out" || fail "missing file: rc $rc '$out'"
out=$("$selfperf" report --bogus 2>&1) && rc=0 || rc=$?
[ "$rc" = 2 ] && grep -q "unknown option '--bogus'" <<<"$out" || fail "unknown option: rc $rc"
head -c 100 /dev/urandom > junk.data
out=$("$selfperf" dump junk.data 2>&1) && rc=0 || rc=$?
[ "$rc" = 1 ] && grep -q "junk.data" <<<"$out" || fail "junk file: rc $rc '$out'"
out=$("$selfperf" bogus 2>&1) && rc=0 || rc=$?
[ "$rc" = 2 ] && grep -q "unknown command 'bogus'" <<<"$out" || fail "unknown command: rc $rc"
echo ok
