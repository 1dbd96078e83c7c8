#include "selfperf/probe.hpp"

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <ostream>

#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "events/arm64_user_access.hpp"
#include "events/perf_syscall.hpp"
#include "selfperf/error.hpp"
#include "selfperf/event.hpp"

namespace selfperf {

namespace {

long read_long(const char* path) {
  try {
    std::string s = detail::read_text_file(path);
    return s.empty() ? -1 : std::stol(s);
  } catch (...) {
    return -1;
  }
}

void inspect_page(int fd, CapabilityReport& r) {
  long page = ::sysconf(_SC_PAGESIZE);
  void* m = ::mmap(nullptr, static_cast<std::size_t>(page), PROT_READ, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return;
  auto* p = static_cast<const volatile perf_event_mmap_page*>(m);
  r.cap_user_rdpmc = p->cap_user_rdpmc;
  r.cap_user_time = p->cap_user_time;
  r.cap_user_time_zero = p->cap_user_time_zero;
  r.cap_user_time_short = p->cap_user_time_short;
  ::munmap(m, static_cast<std::size_t>(page));
}

}  // namespace

std::string CapabilityReport::fast_path_verdict() const {
  if (!perf_event_open) return "unavailable: perf_event_open fails (" + perf_event_open_error + ")";
  if (!hardware_events) return "syscall: no PMU (hardware events do not open; only software events, read with read(2))";
  if (rdpmc_sysfs == "0") return "syscall: rdpmc disabled in sysfs";
  if (perf_user_access == "0")
    return "syscall: kernel.perf_user_access is 0 (arm64 keeps the counters from user space; "
           "sudo sysctl kernel.perf_user_access=1 allows it)";
  if (!cap_user_rdpmc) return "syscall: cap_user_rdpmc clear";
  return "rdpmc";
}

CapabilityReport probe() {
  CapabilityReport r;
  utsname names{};
  if (::uname(&names) == 0) r.machine = names.machine;
  r.perf_event_paranoid = detail::perf_event_paranoid();
  r.privileged = detail::has_perf_privilege();
  r.kernel_counting = detail::kernel_counting_allowed();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/bus/event_source/devices", ec))
    r.pmus.push_back(entry.path().filename().string());
  std::sort(r.pmus.begin(), r.pmus.end());
  std::string rdpmc = detail::read_text_file("/sys/bus/event_source/devices/cpu/rdpmc");
  r.rdpmc_sysfs = rdpmc.empty() ? "absent" : rdpmc;
  const std::string user_access = detail::perf_user_access_sysctl();
  if (!user_access.empty()) r.perf_user_access = user_access;
  for (const auto& pmu : detail::user_access_pmus("/sys/bus/event_source/devices"))
    r.user_access_pmus.push_back(pmu.name + (pmu.long_bits ? "" : " (no `long`: 32-bit counters)"));
  r.perf_event_mlock_kb = read_long("/proc/sys/kernel/perf_event_mlock_kb");
  r.perf_event_max_sample_rate = read_long("/proc/sys/kernel/perf_event_max_sample_rate");
  r.tracefs = "not mounted";
  for (const char* root : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"})
    if (std::filesystem::exists(std::string(root) + "/events", ec)) { r.tracefs = root; break; }

  auto try_open = [&](const char* name, std::string& error) -> detail::Fd {
    perf_event_attr attr = to_attr(parse_event(name));
    attr.exclude_kernel = r.kernel_counting ? 0 : 1;
    attr.exclude_hv = 1;
    attr.size = sizeof attr;
    int fd = detail::perf_event_open(attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) error = detail::open_error_message(errno, attr, name);
    return detail::Fd(fd);
  };
  detail::Fd sw = try_open("task-clock", r.perf_event_open_error);
  r.perf_event_open = static_cast<bool>(sw);
  detail::Fd hw = try_open("cycles", r.hardware_error);
  r.hardware_events = static_cast<bool>(hw);
  r.counters_32bit = detail::user_access_32bit_fallbacks().load(std::memory_order_relaxed);
  if (hw) {
    r.page_event = "cycles";
    inspect_page(hw.get(), r);
  } else if (sw) {
    r.page_event = "task-clock";
    inspect_page(sw.get(), r);
  }
  return r;
}

std::ostream& operator<<(std::ostream& out, const CapabilityReport& r) {
  auto yes = [](bool b) { return b ? "yes" : "no"; };
  out << "selfperf capability report\n";
  out << "  machine                    " << (r.machine.empty() ? "unknown" : r.machine) << "\n";
  out << "  perf_event_paranoid        " << r.perf_event_paranoid
      << (r.privileged ? " (CAP_PERFMON/CAP_SYS_ADMIN held: limits do not apply)" : "") << "\n";
  out << "  kernel-side counting       " << yes(r.kernel_counting)
      << (r.kernel_counting ? "" : " (events open user-only; context-switches/cpu-migrations read 0)") << "\n";
  out << "  perf_event_open            " << yes(r.perf_event_open);
  if (!r.perf_event_open) out << " - " << r.perf_event_open_error;
  out << "\n  PMUs                       ";
  for (std::size_t i = 0; i < r.pmus.size(); ++i) out << (i ? ", " : "") << r.pmus[i];
  out << "\n  hardware events (cycles)   " << yes(r.hardware_events);
  if (!r.hardware_events) out << " - " << r.hardware_error;
  out << "\n  mmap page of " << r.page_event << ":\n";
  out << "    cap_user_rdpmc           " << yes(r.cap_user_rdpmc) << "\n";
  out << "    cap_user_time            " << yes(r.cap_user_time) << "\n";
  out << "    cap_user_time_zero       " << yes(r.cap_user_time_zero) << "\n";
  out << "    cap_user_time_short      " << yes(r.cap_user_time_short) << "\n";
  out << "  cpu/rdpmc (sysfs)          " << r.rdpmc_sysfs << "\n";
  if (r.perf_user_access != "absent" || !r.user_access_pmus.empty()) {
    out << "  kernel.perf_user_access    " << r.perf_user_access << "\n";
    out << "  PMUs with user access      ";
    for (std::size_t i = 0; i < r.user_access_pmus.size(); ++i) out << (i ? ", " : "") << r.user_access_pmus[i];
    out << "\n  32-bit counter fallbacks   " << r.counters_32bit << "\n";
  }
  out << "  perf_event_mlock_kb        " << r.perf_event_mlock_kb << "\n";
  out << "  perf_event_max_sample_rate " << r.perf_event_max_sample_rate << " Hz\n";
  out << "  tracefs                    " << r.tracefs << "\n";
  out << "  counter read path          " << r.fast_path_verdict() << "\n";
  return out;
}

}  // namespace selfperf
