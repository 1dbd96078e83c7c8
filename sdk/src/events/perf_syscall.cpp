#include "events/perf_syscall.hpp"

#include "events/arm64_user_access.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "selfperf/error.hpp"

namespace selfperf::detail {

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

pid_t current_tid() noexcept { return static_cast<pid_t>(::syscall(SYS_gettid)); }

namespace {
int raw_perf_event_open(perf_event_attr& attr, pid_t pid, int cpu, int group_fd, unsigned long flags) noexcept {
  return static_cast<int>(::syscall(SYS_perf_event_open, &attr, pid, cpu, group_fd, flags));
}
}  // namespace

int perf_event_open(perf_event_attr& attr, pid_t pid, int cpu, int group_fd, unsigned long flags) noexcept {
#if defined(__aarch64__)
  // An arm64 PMU lets a thread read its own counters with mrs only for events that asked for it, and the kernel
  // allows that only on events that follow a task (pid != -1). 64-bit counters (`long`) where the PMU has them;
  // a PMU without 64-bit event counters refuses `long` with EOPNOTSUPP: 32-bit counters then, counted for
  // probe(). attr then holds the terms the event was opened with.
  static const std::vector<UserAccessPmu> pmus = user_access_pmus("/sys/bus/event_source/devices");
  if (pid != -1) {
    if (const UserAccessPmu* pmu = user_access_pmu_for(attr, pmus)) {
      perf_event_attr wide = attr;
      request_user_access(wide, *pmu, true);
      int fd = raw_perf_event_open(wide, pid, cpu, group_fd, flags);
      if (fd >= 0 || errno != EOPNOTSUPP || pmu->long_bits == 0) {
        if (fd >= 0) attr = wide;
        return fd;
      }
      perf_event_attr narrow = attr;
      request_user_access(narrow, *pmu, false);
      fd = raw_perf_event_open(narrow, pid, cpu, group_fd, flags);
      if (fd >= 0) {
        attr = narrow;
        user_access_32bit_fallbacks().fetch_add(1, std::memory_order_relaxed);
      }
      return fd;
    }
  }
#endif
  return raw_perf_event_open(attr, pid, cpu, group_fd, flags);
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream out;
  out << in.rdbuf();
  std::string s = out.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

int perf_event_paranoid() noexcept {
  try {
    std::string s = read_text_file("/proc/sys/kernel/perf_event_paranoid");
    return s.empty() ? 2 : std::stoi(s);
  } catch (...) {
    return 2;
  }
}

bool has_capability(int cap) noexcept {
  __user_cap_header_struct header{};
  header.version = _LINUX_CAPABILITY_VERSION_3;
  __user_cap_data_struct data[2]{};
  if (cap < 0 || cap >= 64 || ::syscall(SYS_capget, &header, data) != 0) return false;
  return (data[cap / 32].effective >> (cap % 32)) & 1u;
}

bool has_perf_privilege() noexcept {
  constexpr int kCapSysAdmin = 21;
  constexpr int kCapPerfmon = 38;
  return has_capability(kCapSysAdmin) || has_capability(kCapPerfmon);
}

bool kernel_counting_allowed() noexcept { return has_perf_privilege() || perf_event_paranoid() < 2; }

bool hardware_cycles_available() noexcept {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_HARDWARE;
  attr.config = PERF_COUNT_HW_CPU_CYCLES;
  attr.disabled = 1;
  attr.exclude_kernel = 1;  // allowed at every paranoid level below 3
  attr.exclude_hv = 1;
  Fd fd(perf_event_open(attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
  return static_cast<bool>(fd);
}

std::vector<std::string> events_that_open(std::initializer_list<std::string_view> names,
                                          std::vector<std::string>& left_out) {
  std::vector<std::string> open;
  for (std::string_view name : names) {
    perf_event_attr attr = to_attr(parse_event(name));
    attr.size = sizeof attr;
    attr.disabled = 1;
    attr.exclude_kernel = 1;  // allowed at every paranoid level below 3
    attr.exclude_hv = 1;
    Fd fd(perf_event_open(attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
    (fd ? open : left_out).emplace_back(name);
  }
  return open;
}

namespace {

// PERF_SAMPLE_BRANCH_STACK refused: software events never have one (EOPNOTSUPP), and a PMU without branch
// records (no LBR/BRS/BRBE, or a VM that hides it) refuses it (EOPNOTSUPP) or is not there at all (ENOENT).
std::string branch_stack_message(int err, const perf_event_attr& attr, const std::string& head) {
  const std::string remedy =
      " Sample without the branch stack, or on a machine whose CPU records branches (Intel LBR, AMD BRS or "
      "LbrExtV2, Arm BRBE) and exposes them (most VMs do not).";
  if (err == EINVAL && (attr.branch_sample_type & ~std::uint64_t{PERF_SAMPLE_BRANCH_PLM_ALL}) == 0)
    return head + "The branch stack (PERF_SAMPLE_BRANCH_STACK) needs a branch type in branch_sample_type "
                  "(PERF_SAMPLE_BRANCH_ANY, ANY_CALL, ...; perf record -j any,u), not only privilege levels.";
  if (err == EINVAL)
    return head + "The PMU rejected the branch filter (branch_sample_type 0x" + [&] {
             char buf[32];
             std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(attr.branch_sample_type));
             return std::string(buf);
           }() + ") of the branch stack (PERF_SAMPLE_BRANCH_STACK): ask for fewer branch types (any,u)." + remedy;
  if (attr.type == PERF_TYPE_SOFTWARE || attr.type == PERF_TYPE_TRACEPOINT)
    return head + "A branch stack (PERF_SAMPLE_BRANCH_STACK) is recorded by the CPU's PMU, and a software event "
                  "or tracepoint never has one: sample a hardware event (cycles:u) instead." + remedy;
  return head + "This machine records no branch stack (PERF_SAMPLE_BRANCH_STACK) for this event: " +
         (err == ENOENT ? "it has no hardware PMU at all." : "its PMU has no branch records.") + remedy;
}

}  // namespace

std::string open_error_message(int err, const perf_event_attr& attr, std::string_view event_name) {
  std::string name(event_name);
  std::string head = "cannot open event '" + name + "': " + std::strerror(err) + ". ";
  if ((attr.sample_type & PERF_SAMPLE_BRANCH_STACK) &&
      (err == EOPNOTSUPP || err == ENOENT || err == ENODEV || err == EINVAL))
    return branch_stack_message(err, attr, head);
  switch (err) {
    case EACCES:
    case EPERM: {
      int paranoid = perf_event_paranoid();
      std::string s = head + "perf_event_paranoid is " + std::to_string(paranoid) + ". ";
      if (!attr.exclude_kernel && paranoid >= 2)
        s += "At level 2 only user-space counting is allowed without CAP_PERFMON: add ':u' to the event, ";
      else if (paranoid >= 3)
        s += "Level 3 and above forbids perf_event_open for unprivileged users: ";
      else
        s += "This event needs privilege: ";
      s += "or lower the level (sudo sysctl kernel.perf_event_paranoid=1), or grant CAP_PERFMON "
           "(sudo setcap cap_perfmon+ep <program>).";
      return s;
    }
    case ENOENT:
    case EOPNOTSUPP:
    case ENODEV:
      if (attr.type == PERF_TYPE_HARDWARE || attr.type == PERF_TYPE_HW_CACHE || attr.type == PERF_TYPE_RAW)
        return head + "This machine has no hardware PMU for it (common in VMs and containers); "
               "use a software event such as task-clock or cpu-clock, or run on bare metal.";
      if (attr.sample_period && attr.type == PERF_TYPE_SOFTWARE)
        return head + "This event cannot be used for sampling; sample on cpu-clock or task-clock instead.";
      return head + "The PMU does not support this event or one of its fields (type " +
             std::to_string(attr.type) + ", config 0x" + [&] {
               char buf[32];
               std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(attr.config));
               return std::string(buf);
             }() + "); check the event name against `perf list`.";
    case EINVAL:
      return head + "The kernel rejected an attribute (type " + std::to_string(attr.type) +
             (attr.precise_ip ? ", precise_ip " + std::to_string(attr.precise_ip) : std::string()) +
             (attr.sample_period ? ", sample period/frequency " + std::to_string(attr.sample_period)
                                 : std::string()) +
             "): check modifiers (:p needs PEBS/IBS hardware), the sampling frequency against "
             "/proc/sys/kernel/perf_event_max_sample_rate, and config bits against the PMU's format.";
    case EMFILE:
    case ENFILE:
      return head + "Out of file descriptors: each event takes one. Raise the limit (ulimit -n, "
             "RLIMIT_NOFILE) or open fewer events.";
    case ENOSYS:
      return head + "perf_event_open is not available: the kernel lacks CONFIG_PERF_EVENTS or a seccomp "
             "filter blocks it (Docker's default profile does; run with --cap-add PERFMON or "
             "--security-opt seccomp=unconfined).";
    case E2BIG:
      return head + "The kernel does not accept this perf_event_attr size (" + std::to_string(attr.size) +
             "); the library was built against newer kernel headers than the running kernel.";
    case EBUSY:
      return head + "Another user holds the PMU exclusively (e.g. an exclusive event or a hypervisor).";
    case ESRCH:
      return head + "The target thread does not exist (it may have exited).";
    case EMSGSIZE:
      return head + "Too many events in one group for this PMU; split the group.";
    default:
      return head + "Unexpected error from perf_event_open.";
  }
}

Fd open_event(perf_event_attr attr, std::string_view event_name, pid_t pid, int cpu, int group_fd,
              unsigned long flags) {
  attr.size = sizeof(attr);
  int fd = perf_event_open(attr, pid, cpu, group_fd, flags);
  if (fd < 0) {
    int err = errno;
    throw Error(open_error_message(err, attr, event_name), err);
  }
  return Fd(fd);
}

}  // namespace selfperf::detail
