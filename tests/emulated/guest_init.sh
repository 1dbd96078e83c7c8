#!/bin/busybox sh
# /init of the emulated arm64 machine (run_guest.sh packs it into the initramfs): sets the machine up the way
# the tests need it, runs every line of /tests.list, prints one machine-parsable line a run, and powers off.
#   /tests.list:  <name> <pass>    (the binary is /tests/<name>)
#   pass          root | nobody | root_user_access0 | nobody_paranoid3
#   output:       SELFPERF-BEGIN <name> <pass> ... SELFPERF-RESULT <name> <pass> pass|fail|skip <exit status>
# The host (check_result.sh) reads these lines from the console log; SELFPERF-DONE says the list ran to its end.
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /tmp && chmod 1777 /tmp
cd /tmp || exit 1

# Debian's kernel boots with perf_user_access=0 (no EL0 counter reads) and perf_event_paranoid=3 (nothing for
# unprivileged users): each pass below sets what it tests.
echo "SELFPERF-GUEST kernel $(uname -r), cpus $(grep -c ^processor /proc/cpuinfo)," \
     "PMUs: $(ls /sys/bus/event_source/devices | tr '\n' ' ')," \
     "boot defaults: perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid)" \
     "perf_user_access=$(cat /proc/sys/kernel/perf_user_access)"
dmesg | grep -i "hw perfevents" | sed 's/^/SELFPERF-GUEST dmesg: /'
# Kernel messages stay in dmesg, off the console, where they would split the tests' lines.
echo 1 > /proc/sys/kernel/printk
# The emulated PMU's overflow interrupt is slow in host time, so the kernel would keep lowering
# perf_event_max_sample_rate ("perf: interrupt took too long") to a few hundred Hz, far below any real
# machine's: the interrupt-time limit is off here, and the rate back at the default, as on hardware.
echo 0 > /proc/sys/kernel/perf_cpu_time_max_percent
echo 100000 > /proc/sys/kernel/perf_event_max_sample_rate

# Each test is cut after this many seconds so that one hung test cannot use up the host's boot timeout.
per_test_timeout=$(sed -n 's/.*selfperf.test_timeout=\([0-9]*\).*/\1/p' /proc/cmdline)
[ -n "$per_test_timeout" ] || per_test_timeout=120

while read -r name pass; do
  [ -n "$name" ] || continue
  case "$pass" in
    root)              paranoid=2; access=1; user=root ;;
    nobody)            paranoid=2; access=1; user=nobody ;;
    root_user_access0) paranoid=2; access=0; user=root ;;
    nobody_paranoid3)  paranoid=3; access=1; user=nobody ;;
    *) echo "SELFPERF-RESULT $name $pass fail unknown-pass"; continue ;;
  esac
  echo "$paranoid" > /proc/sys/kernel/perf_event_paranoid
  echo "$access" > /proc/sys/kernel/perf_user_access
  echo "SELFPERF-BEGIN $name $pass"
  start=$(cut -d' ' -f1 /proc/uptime)
  # Output to a file, not the console: a program that sees a terminal colours it (doctest does).
  out=/tmp/output.$name.$pass
  if [ "$user" = root ]; then
    SELFPERF_GUEST_PASS=$pass timeout "$per_test_timeout" "/tests/$name" > "$out" 2>&1 < /dev/null
  else
    SELFPERF_GUEST_PASS=$pass timeout "$per_test_timeout" su -s /bin/sh nobody -c "/tests/$name" > "$out" 2>&1 < /dev/null
  fi
  status=$?
  cat "$out"
  end=$(cut -d' ' -f1 /proc/uptime)
  case $status in
    0) verdict=pass ;;
    77) verdict=skip ;;
    *) verdict=fail ;;
  esac
  echo "SELFPERF-RESULT $name $pass $verdict $status $start $end"
done < /tests.list
echo "SELFPERF-DONE"
sync
poweroff -f
