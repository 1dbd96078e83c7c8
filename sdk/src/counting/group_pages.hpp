#pragma once
// The members' mmap pages of a CounterGroup: mapped once, pre-faulted, read under all seqlocks at once.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <linux/perf_event.h>

#include "events/perf_syscall.hpp"
#include "selfperf/counter_group.hpp"
#include "selfperf/event.hpp"

namespace selfperf::detail {

class GroupPages {
 public:
  using ReadPmc = std::uint64_t (*)(std::uint32_t);
  using ReadTimestamp = std::uint64_t (*)();

  GroupPages() = default;
  GroupPages(GroupPages&&) = delete;
  ~GroupPages();

  // Maps one page per member. A member whose page refuses user-space reads for a reason that cannot change
  // (software event, rdpmc off) makes the whole group take read(2): one syscall reads every member anyway.
  void map(const std::vector<Fd>& fds, const std::vector<EventSpec>& specs);

  bool usable() const noexcept { return usable_; }
  // Why the group cannot take the fast path at all ("syscall: no PMU", …).
  std::string_view refusal() const noexcept { return refusal_; }
  // Why the last fast read gave up (e.g. "syscall: event not running").
  std::string_view last_refusal() const noexcept { return last_refusal_; }

  // All members under all their seqlocks; false ⇒ the caller reads with read(2).
  bool read(GroupReading& out) noexcept;

  // Test hook: read synthetic pages with a fake counter and timestamp read instead of rdpmc/rdtsc.
  void use_synthetic(std::vector<const volatile perf_event_mmap_page*> pages, ReadPmc read_pmc,
                     ReadTimestamp read_timestamp);

 private:
  std::vector<void*> mappings_;
  std::vector<const volatile perf_event_mmap_page*> pages_;
  ReadPmc synthetic_pmc_ = nullptr;
  ReadTimestamp synthetic_timestamp_ = nullptr;
  bool usable_ = false;
  std::string refusal_ = "syscall: not mapped";
  std::string_view last_refusal_;
};

// Lets tests put synthetic member pages behind a real group, to exercise the all-seqlocks group read.
struct CounterGroupTestAccess {
  static void use_synthetic_pages(CounterGroup& group, std::vector<const volatile perf_event_mmap_page*> pages,
                                  std::uint64_t (*read_pmc)(std::uint32_t), std::uint64_t (*read_timestamp)());
};

}  // namespace selfperf::detail
