#pragma once
// CounterGroup: a list of events opened as one perf group on the calling thread.
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "selfperf/event.hpp"

namespace selfperf {

namespace detail {
struct CounterGroupTestAccess;
}

// A group is read into fixed storage so that a read never allocates.
inline constexpr std::size_t kMaxGroupMembers = 16;

// No default member initialisers: a GroupReading's fixed storage must not be zeroed on every read (that
// would double the cost of a Scope). Write `CounterValue v{}` for a zeroed one.
struct CounterValue {
  std::uint64_t value;         // raw count (not scaled)
  std::uint64_t time_enabled;  // ns the event was enabled
  std::uint64_t time_running;  // ns it was actually on a counter (less when multiplexed)
  std::uint64_t id;            // kernel event id (PERF_FORMAT_ID)

  // "Not counted" (never scheduled) is different from a count of zero.
  bool counted() const noexcept { return time_running != 0; }
  // value × enabled / running: the estimate of what a never-multiplexed counter would show.
  double scaled() const noexcept;
};

// The difference between two readings of one member, scaled from the deltas (Δcount × Δenabled / Δrunning).
struct CounterDelta {
  std::uint64_t count = 0;
  std::uint64_t time_enabled = 0;
  std::uint64_t time_running = 0;
  bool counted() const noexcept { return time_running != 0; }
  double scaled() const noexcept;
};
CounterDelta delta(const CounterValue& before, const CounterValue& after) noexcept;

// Only the first size() values are meaningful; the rest is left uninitialised.
class GroupReading {
 public:
  GroupReading() noexcept {}
  std::size_t size() const noexcept { return size_; }
  const CounterValue& operator[](std::size_t i) const noexcept { return values_[i]; }
  CounterValue& operator[](std::size_t i) noexcept { return values_[i]; }
  const CounterValue* begin() const noexcept { return values_.data(); }
  const CounterValue* end() const noexcept { return values_.data() + size_; }
  void resize(std::size_t n) noexcept { size_ = n; }

 private:
  std::array<CounterValue, kMaxGroupMembers> values_;
  std::size_t size_ = 0;
};

struct GroupOptions {
  // Read the whole group with one read(2) even where the rdpmc fast path is possible: the kernel then
  // reads every member in one go with the PMU stopped.
  bool consistent = false;
  // Measure the cost of an empty region at creation (per event: the minimum over many back-to-back read
  // pairs) and subtract it from every Scope's delta, so regions of a few thousand instructions give
  // trustworthy deltas. Off by default: subtraction changes what a region reports. See overhead().
  bool subtract_overhead = false;
};

class CounterGroup {
 public:
  CounterGroup(std::initializer_list<std::string_view> events, GroupOptions options = {});
  explicit CounterGroup(const std::vector<std::string>& events, GroupOptions options = {});
  explicit CounterGroup(std::vector<EventSpec> events, GroupOptions options = {});
  CounterGroup(CounterGroup&&) noexcept;
  CounterGroup& operator=(CounterGroup&&) noexcept;
  CounterGroup(const CounterGroup&) = delete;
  CounterGroup& operator=(const CounterGroup&) = delete;
  ~CounterGroup();

  std::size_t size() const noexcept;
  const EventSpec& event(std::size_t i) const;

  // Group-wide ioctls (PERF_IOC_FLAG_GROUP).
  void enable();
  void disable();
  void reset();

  GroupReading read();
  void read(GroupReading& out);
  // Which path the last read took and why: "rdpmc", "syscall: no PMU", "syscall: other thread", …
  std::string_view read_path() const noexcept;

  // True when events that did not name a privilege level were opened user-only because
  // perf_event_paranoid forbids kernel counting for this process.
  bool user_only() const noexcept;
  // Human-readable notes about how the group was opened (user-only narrowing, events that read 0 so).
  const std::vector<std::string>& notes() const noexcept;

  // Per member, the calibrated cost of an empty region (scaled counts) that Scope subtracts; empty unless
  // GroupOptions::subtract_overhead was set.
  std::span<const double> overhead() const noexcept;

  pid_t owner_tid() const noexcept;
  int leader_fd() const noexcept;
  int fd(std::size_t i) const;

 private:
  friend struct detail::CounterGroupTestAccess;
  void calibrate();
  struct State;
  State* state_;
};

}  // namespace selfperf
