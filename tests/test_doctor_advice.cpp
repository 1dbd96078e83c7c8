// selfperf-doctor's diagnosis for situations this machine cannot produce on demand: every "no" it reports
// carries the fix, and the cause of a perf_event_open failure is told apart by errno, seccomp and the level.
#include <doctest.h>

#include <cerrno>
#include <string>

#include "doctor_advice.hpp"
#include "events/perf_syscall.hpp"

namespace {

using selfperf::doctor::Environment;
using selfperf::doctor::Finding;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

Finding row(const std::vector<Finding>& rows, const std::string& name) {
  for (const auto& f : rows)
    if (f.name == name) return f;
  FAIL("no row " << name);
  return rows.front();
}

selfperf::CapabilityReport unprivileged_vm() {
  selfperf::CapabilityReport caps;
  caps.perf_event_paranoid = 2;
  caps.perf_event_open = true;
  caps.hardware_error = "cannot open event 'cycles': No such file or directory.";
  caps.page_event = "task-clock";
  caps.tracefs = "not mounted";
  caps.rdpmc_sysfs = "absent";
  return caps;
}

}  // namespace

TEST_CASE("every row that says no carries a fix") {
  auto caps = unprivileged_vm();
  Environment env;
  env.nofile_limit = 16;
  const auto rows = selfperf::doctor::findings(caps, env);
  int noes = 0;
  for (const auto& f : rows)
    if (!f.ok) {
      ++noes;
      CHECK_MESSAGE(!f.fix.empty(), f.name);
    }
  CHECK(noes >= 4);  // kernel-side counting, hardware events, descriptor limit, tracefs
  CHECK(contains(row(rows, "kernel-side counting").fix, "sysctl kernel.perf_event_paranoid=1"));
  CHECK(contains(row(rows, "kernel-side counting").fix, "cap_perfmon"));
  CHECK(contains(row(rows, "tracefs (tracepoint events)").fix, "mount -t tracefs nodev /sys/kernel/tracing"));
  CHECK(contains(row(rows, "file descriptor limit").fix, "ulimit -n"));
}

TEST_CASE("tracefs mounted but unreadable is not reported as unmounted") {
  auto caps = unprivileged_vm();
  Environment env;
  env.tracefs_mount = "/sys/kernel/tracing";
  const auto& f = row(selfperf::doctor::findings(caps, env), "tracefs (tracepoint events)");
  CHECK(contains(f.value, "not readable"));
  CHECK(!contains(f.fix, "mount -t tracefs"));
}

TEST_CASE("perf_event_open blocked by seccomp names seccomp and the container remedy, for ENOSYS and EPERM") {
  for (int err : {ENOSYS, EPERM}) {
    Environment env;
    env.open_errno = err;
    env.seccomp_mode = 2;
    CHECK(contains(selfperf::doctor::open_diagnosis(env, 2), "seccomp"));
    CHECK(contains(selfperf::doctor::open_fix(env, 2), "--cap-add PERFMON"));
    CHECK(contains(selfperf::doctor::open_fix(env, 2), "seccomp="));
    auto caps = unprivileged_vm();
    caps.perf_event_open = false;
    const auto& open = row(selfperf::doctor::findings(caps, env), "perf_event_open");
    CHECK(!open.ok);
    CHECK(contains(open.value, "seccomp"));
    CHECK(contains(open.fix, "seccomp"));
  }
}

TEST_CASE("ENOSYS without seccomp and without the sysctl is a kernel without perf events") {
  Environment env;
  env.open_errno = ENOSYS;
  env.seccomp_mode = 0;
  env.perf_sysctl_present = false;
  CHECK(contains(selfperf::doctor::open_diagnosis(env, 2), "CONFIG_PERF_EVENTS"));
  CHECK(contains(selfperf::doctor::open_fix(env, 2), "CONFIG_PERF_EVENTS=y"));
}

TEST_CASE("paranoid 3 is diagnosed with the sysctl and CAP_PERFMON") {
  Environment env;
  env.open_errno = EACCES;
  env.seccomp_mode = 0;
  CHECK(contains(selfperf::doctor::open_diagnosis(env, 3), "perf_event_paranoid is 3"));
  CHECK(contains(selfperf::doctor::open_fix(env, 3), "sysctl kernel.perf_event_paranoid=2"));
  CHECK(contains(selfperf::doctor::open_fix(env, 3), "cap_perfmon"));
  auto caps = unprivileged_vm();
  caps.perf_event_paranoid = 3;
  const auto& level = row(selfperf::doctor::findings(caps, env), "perf_event_paranoid");
  CHECK(!level.ok);
  CHECK(contains(level.fix, "sysctl"));
  // With CAP_PERFMON the level does not apply.
  caps.privileged = true;
  CHECK(row(selfperf::doctor::findings(caps, env), "perf_event_paranoid").ok);
}

TEST_CASE("out of descriptors is diagnosed with ulimit -n") {
  Environment env;
  env.open_errno = EMFILE;
  env.nofile_limit = 4;
  CHECK(contains(selfperf::doctor::open_diagnosis(env, 2), "ulimit -n is 4"));
  CHECK(contains(selfperf::doctor::open_fix(env, 2), "ulimit -n 4096"));
}

TEST_CASE("observe() reads this process: no seccomp filter here, perf_event_open opens") {
  const Environment env = selfperf::doctor::observe();
  CHECK(env.seccomp_mode >= 0);  // the field exists on every kernel this library supports
  // A software event, user space only, opens at every paranoid level below 3 where no filter blocks it.
  if (env.seccomp_mode == 0 && selfperf::detail::perf_event_paranoid() < 3) CHECK(env.open_errno == 0);
}

TEST_CASE("a failed live check gets perf_event_open's fix, the descriptor fix, or its own advice") {
  Environment blocked;
  blocked.open_errno = EPERM;
  blocked.seccomp_mode = 2;
  CHECK(contains(selfperf::doctor::failure_fix("cannot open event", blocked, "own"), "perf_event_open"));
  Environment fine;
  CHECK(contains(selfperf::doctor::failure_fix("cannot open event 'x': Too many open files.", fine, "own"),
                 "ulimit -n"));
  CHECK(selfperf::doctor::failure_fix("unwound 3 frames", fine, "own") == "own");
}

namespace {

// An arm64 machine with a PMU (the emulated one: armv8_pmuv3, Debian's kernel), user access as `access` says.
selfperf::CapabilityReport arm64_with_pmu(const char* access) {
  selfperf::CapabilityReport caps;
  caps.machine = "aarch64";
  caps.perf_event_paranoid = 2;
  caps.perf_event_open = true;
  caps.hardware_events = true;
  caps.page_event = "cycles";
  caps.cap_user_rdpmc = true;  // the page says so even at perf_user_access=0 (its index is 0 then)
  caps.cap_user_time = true;
  caps.rdpmc_sysfs = "absent";
  caps.perf_user_access = access;
  caps.user_access_pmus = {"armv8_pmuv3_0"};
  caps.tracefs = "/sys/kernel/tracing";
  return caps;
}

}  // namespace

TEST_CASE("arm64: the fast path is kernel.perf_user_access's, not cpu/rdpmc's, and time is the arch timer's") {
  Environment env;
  SUBCASE("perf_user_access=0: no, with the sysctl that allows it") {
    const auto rows = selfperf::doctor::findings(arm64_with_pmu("0"), env);
    const Finding fast = row(rows, "user-space counter reads (mrs)");
    CHECK_FALSE(fast.ok);
    CHECK(contains(fast.value, "kernel.perf_user_access: 0"));
    CHECK(contains(fast.fix, "sudo sysctl kernel.perf_user_access=1"));
    CHECK_FALSE(contains(fast.fix, "cpu/rdpmc"));
  }
  SUBCASE("perf_user_access=1: yes") {
    const auto rows = selfperf::doctor::findings(arm64_with_pmu("1"), env);
    CHECK(row(rows, "user-space counter reads (mrs)").ok);
    CHECK(row(rows, "arch timer time conversion (cap_user_time)").ok);
    for (const auto& f : rows) CHECK_MESSAGE(!contains(f.name, "TSC"), f.name);
  }
  SUBCASE("a kernel before 5.17 (no perf_user_access, no rdpmc term, no user reads): no, and why") {
    auto caps = arm64_with_pmu("1");
    caps.perf_user_access = "absent";
    caps.user_access_pmus.clear();
    caps.cap_user_rdpmc = false;
    const Finding fast = row(selfperf::doctor::findings(caps, env), "user-space counter reads (mrs)");
    CHECK_FALSE(fast.ok);
    CHECK(contains(fast.fix, "5.17"));
  }
  SUBCASE("x86-64 keeps its names") {
    auto caps = unprivileged_vm();
    caps.hardware_events = true;
    const auto rows = selfperf::doctor::findings(caps, env);
    CHECK(contains(row(rows, "user-space counter reads (rdpmc)").fix, "cpu/rdpmc"));
    CHECK(row(rows, "TSC time conversion (cap_user_time)").ok);
  }
}
