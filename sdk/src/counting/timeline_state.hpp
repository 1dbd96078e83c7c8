#pragma once
// The Timeline's preallocated records, and the hooks through which Scope and FrameLoop record into the attached
// timeline (timeline.cpp). Internal.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "selfperf/counter_group.hpp"
#include "selfperf/frame_loop.hpp"
#include "selfperf/timeline.hpp"

namespace selfperf {

namespace detail {

enum class TimelineKind : std::uint8_t { scope, frame };

struct TimelineRecord {
  std::atomic<std::uint32_t> ready{0};  // set (release) once the rest is written: the writer may be mid-record
  std::int32_t tid = 0;
  TimelineKind kind = TimelineKind::scope;
  std::uint8_t events = 0;
  bool counted = true;  // every event counted (otherwise no deltas)
  char name[64] = {};   // a copy, truncated: the Region may be gone when the trace is written
  std::uint64_t begin_ns = 0;
  std::uint64_t end_ns = 0;
  std::uint64_t frame_index = 0;
  std::uint32_t over_budget_mask = 0;
  double deltas[kMaxGroupMembers] = {};
};

struct TimelineThread {
  std::atomic<std::uint32_t> ready{0};
  std::int32_t tid = 0;
  char name[16] = {};  // the kernel's thread name (comm), at most 15 characters
};

// Readers (the JSON writer) see a record only once its `ready` flag is set.
inline constexpr std::size_t kTimelineThreads = 1024;

// Whether a timeline is attached (one relaxed load), and CLOCK_MONOTONIC in ns.
bool timeline_attached() noexcept;
std::uint64_t timeline_now_ns() noexcept;
// A Scope ended: `before`/`after` are its group readings, `overhead` what Region::record subtracts.
void timeline_record_scope(std::string_view name, const GroupReading& before, const GroupReading& after,
                           std::span<const double> overhead, std::uint64_t begin_ns, std::uint64_t end_ns) noexcept;
// A FrameLoop frame ended (its record, the number of events it has, and its CLOCK_MONOTONIC bounds).
void timeline_record_frame(const FrameRecord& frame, std::size_t events, std::uint64_t begin_ns,
                           std::uint64_t end_ns) noexcept;

}  // namespace detail

struct Timeline::State {
  std::size_t capacity = 0;
  std::unique_ptr<detail::TimelineRecord[]> records;
  std::atomic<std::uint64_t> next{0};  // records claimed, including those that found the timeline full
  std::unique_ptr<detail::TimelineThread[]> threads;
  std::atomic<std::size_t> next_thread{0};
  std::uint64_t generation = 0;  // which attach() this is, so that threads register again after a re-attach
  std::vector<std::string> event_names;
};

}  // namespace selfperf
