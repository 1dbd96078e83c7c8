#!/bin/sh
# Runs in the emulated arm64 machine (busybox sh, as root and as nobody; guest_init.sh sets the pass up): the
# programs a user runs first, cross-built, on a real PMU driver. The samples read hardware counters through
# the fast path (or say why not), the preload profiler samples a program it did not build on `cycles` into
# files with the program's own functions, and the doctor's verdict is healthy. The binaries and
# libselfperf_profile.so lie in /tests (build_guest_tests.sh, run_guest.sh).
#   SELFPERF_GUEST_PASS  root | nobody | root_user_access0 (perf_user_access=0: counters by read(2))
set -u
pass=${SELFPERF_GUEST_PASS:-root}
bin=/tests
work=$(mktemp -d /tmp/programs.XXXXXX) || { echo "FAIL: mktemp"; exit 1; }
cd "$work" || exit 1
fail() { echo "FAIL ($pass): $*"; exit 1; }
has() { grep -q "$1" "$2" || fail "$3 (no '$1' in $2: $(cat "$2"))"; }

# The capability report: the hardware PMU, and the read path it promises.
"$bin/capabilities" > caps.out 2>&1 || fail "capabilities exited $?: $(cat caps.out)"
cat caps.out
has "hardware events (cycles)   yes" caps.out "capabilities sees no hardware PMU"
has "PMUs with user access      armv8_pmuv3" caps.out "capabilities found no PMU with an rdpmc term"
if [ "$pass" = root_user_access0 ]; then
  has "counter read path          syscall: kernel.perf_user_access is 0" caps.out \
    "perf_user_access=0 is not named as the reason"
else
  has "counter read path          rdpmc" caps.out "capabilities does not promise the fast path"
fi

# A program instrumented with SELFPERF_SCOPE: hardware events by default, and the path its reads took.
"$bin/hot_loop" > hot.out 2>&1 || fail "hot_loop exited $?: $(cat hot.out)"
cat hot.out
has "^events: cycles" hot.out "hot_loop's default events are not the hardware ones"
has "^    integrate " hot.out "hot_loop's nested regions are missing"
grep -q "not measured" hot.out && fail "hot_loop's regions were not measured"
if [ "$pass" = root_user_access0 ]; then
  has "^read path: syscall" hot.out "hot_loop read by rdpmc with perf_user_access=0"
  has "perf_user_access" hot.out "hot_loop's read path does not name perf_user_access"
  echo "ok ($pass): capabilities and hot_loop name perf_user_access=0 as the reason for read(2)"
  exit 0
fi
has "^read path: rdpmc" hot.out "hot_loop's reads did not take the fast path"
echo "ok ($pass): capabilities and hot_loop read hardware counters through the fast path"

# selfperf stat's default events: the hardware ones this PMU counts, the others shown as perf shows them.
"$bin/selfperf" stat -- /bin/true > stat.out 2>&1 || fail "selfperf stat exited $?: $(cat stat.out)"
cat stat.out
grep -Eq "^ +[0-9,]+ +cycles" stat.out || fail "selfperf stat counted no cycles"
grep -Eq "^ +[0-9,]+ +instructions" stat.out || fail "selfperf stat counted no instructions"
echo "ok ($pass): selfperf stat counts cycles and instructions"

# Whole-program profiling of a program that knows nothing of it: threads started later, a fork, an exec.
LD_PRELOAD=$bin/libselfperf_profile.so SELFPERF_PROFILE=$work/pre.data "$bin/profile_workload" 150 \
  > pre.out 2> pre.err || fail "profile_workload under the preload exited $?: $(cat pre.err)"
cat pre.err
[ -s pre.data ] && [ -s pre.data.folded ] && [ -s pre.data.svg ] || fail "pre.data, .folded or .svg missing: $(ls)"
has "</svg>" pre.data.svg "the SVG is incomplete"
for fn in main_burn thread_burn_one thread_burn_two; do
  has "$fn" pre.data.folded "the folded stacks lack $fn"
done
grep -q child_burn pre.data.folded && fail "the forked child's samples reached the parent's profile"
has "exec child sees SELFPERF_PROFILE='$work/pre.data'" pre.out "the exec'd shell lost SELFPERF_PROFILE"
# The profiler's summary names the event: the default is cycles where a PMU exists.
has "cycles" pre.err "the preload profile did not sample cycles"
samples=$(awk '{ n += $NF } END { print n + 0 }' pre.data.folded)
[ "$samples" -ge 100 ] || fail "only $samples samples in pre.data.folded"
echo "ok ($pass): the preload profiler sampled cycles: $samples samples, main_burn and both threads named"

# The doctor: every check it can run here passes, the fast path among them. On one CPU: its sampling check
# runs two busy threads, and with both vCPUs busy QEMU's cycle counter overflows in bursts that its handler
# cannot keep up with (one thread's 114 overflows gave 15 samples; see hw_sampler_threads.cpp).
taskset 1 "$bin/selfperf-doctor" > doctor.out 2>&1
status=$?
cat doctor.out
[ $status -eq 0 ] || fail "selfperf-doctor exited $status"
has "fast path  pass" doctor.out "the doctor's fast-path check did not pass"
has "selfperf-doctor: healthy" doctor.out "the doctor's verdict is not healthy"
echo "ok ($pass): the doctor's verdict is healthy"
