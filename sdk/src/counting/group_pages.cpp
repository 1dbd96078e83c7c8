#include "counting/group_pages.hpp"

#include "events/arm64_user_access.hpp"

#include "selfperf/hw_read.hpp"
#include "selfperf/mmap_read.hpp"

#include <cerrno>
#include <cstring>

#include <sys/mman.h>
#include <unistd.h>

namespace selfperf::detail {

namespace {
std::size_t page_size() noexcept { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }
}  // namespace

GroupPages::~GroupPages() {
  for (void* m : mappings_) ::munmap(m, page_size());
}

void GroupPages::map(const std::vector<Fd>& fds, const std::vector<EventSpec>& specs) {
  usable_ = true;
  refusal_.clear();
  for (std::size_t i = 0; i < fds.size(); ++i) {
    // One page: the user page alone, no ring buffer. MAP_POPULATE pre-faults it so the first read costs
    // what every later read costs.
    void* m = ::mmap(nullptr, page_size(), PROT_READ, MAP_SHARED | MAP_POPULATE, fds[i].get(), 0);
    if (m == MAP_FAILED) {
      usable_ = false;
      refusal_ = "syscall: mmap of '" + specs[i].name + "' page failed (" + std::strerror(errno) + ")";
      continue;
    }
    mappings_.push_back(m);
    auto* page = static_cast<const volatile perf_event_mmap_page*>(m);
    pages_.push_back(page);
    if (!usable_) continue;
    if (!specs[i].needs_hardware_pmu()) {
      usable_ = false;
      refusal_ = "syscall: no PMU ('" + specs[i].name + "' is a software event; it has no hardware counter to rdpmc)";
    } else if (!page->cap_user_rdpmc) {
      usable_ = false;
      std::string sysfs = read_text_file("/sys/bus/event_source/devices/" + specs[i].pmu + "/rdpmc");
      refusal_ = sysfs == "0" ? "syscall: rdpmc disabled in sysfs (/sys/bus/event_source/devices/" + specs[i].pmu +
                                    "/rdpmc is 0; echo 1 or 2 there as root to allow it)"
                              : "syscall: cap_user_rdpmc clear on '" + specs[i].name + "' page";
    }
#if defined(__aarch64__)
    else if (perf_user_access_sysctl() == "0") {
      // The page says cap_user_rdpmc but gives index 0, which would read as "not running".
      usable_ = false;
      refusal_ = "syscall: kernel.perf_user_access is 0 (arm64 keeps the counters from user space; "
                 "sudo sysctl kernel.perf_user_access=1 allows it)";
    }
#endif
  }
}

void GroupPages::use_synthetic(std::vector<const volatile perf_event_mmap_page*> pages, ReadPmc read_pmc,
                               ReadTimestamp read_timestamp) {
  pages_ = std::move(pages);
  synthetic_pmc_ = read_pmc;
  synthetic_timestamp_ = read_timestamp;
  usable_ = true;
  refusal_.clear();
}

namespace {
std::string_view syscall_reason(MmapRefusal refusal) noexcept {
  switch (refusal) {
    case MmapRefusal::not_running: return "syscall: event not running (page index 0)";
    case MmapRefusal::no_rdpmc: return "syscall: cap_user_rdpmc clear";
    case MmapRefusal::bad_pmc_width: return "syscall: unusable pmc_width on the page";
    case MmapRefusal::bad_time_shift: return "syscall: unusable time_shift on the page";
    case MmapRefusal::unstable: return "syscall: page kept changing (seqlock retries exhausted)";
    case MmapRefusal::none: break;
  }
  return "syscall: fast read refused";
}
}  // namespace

bool GroupPages::read(GroupReading& out) noexcept {
  PageReading readings[kMaxGroupMembers];
  const bool ok = synthetic_pmc_ ? read_mmap_pages(pages_, readings, synthetic_pmc_, synthetic_timestamp_)
                                 : read_self_group(pages_, readings);
  if (!ok) {
    MmapRefusal why = MmapRefusal::unstable;
    for (const auto* page : pages_)
      if (MmapRefusal r = check_mmap_page(*page); r != MmapRefusal::none) {
        why = r;
        break;
      }
    last_refusal_ = syscall_reason(why);
    return false;
  }
  for (std::size_t i = 0; i < pages_.size(); ++i) {
    out[i].value = readings[i].count;
    out[i].time_enabled = readings[i].time_enabled;
    out[i].time_running = readings[i].time_running;
  }
  return true;
}

}  // namespace selfperf::detail
