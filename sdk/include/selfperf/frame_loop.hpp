#pragma once
// FrameLoop: per-frame (or per-message) deltas of every event of a CounterGroup plus wall time, each into its
// own Histogram, and a bounded record of the frames that went over a budget, with their counter deltas.
//
//   selfperf::CounterGroup group{"task-clock", "page-faults:u"};
//   group.enable();
//   selfperf::FrameLoop loop(group, {.wall_budget = std::chrono::microseconds(16'600)});
//   while (running) { loop.mark(); simulate(); render(); }
//   std::fputs(loop.report().c_str(), stdout);
//
// Everything is allocated when the loop is constructed; begin/end/mark read the group into fixed storage, read
// CLOCK_MONOTONIC (vDSO, no syscall) and record into preallocated histograms and a preallocated ring, so a frame
// never allocates.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "selfperf/counter_group.hpp"
#include "selfperf/histogram.hpp"

namespace selfperf {

struct FrameLoopOptions {
  std::chrono::nanoseconds wall_budget{0};   // a frame longer than this is over budget; 0: no wall budget
  std::size_t over_budget_capacity = 64;     // the most recent over-budget frames kept (older ones are counted)
};

// One measured frame.
struct FrameRecord {
  std::uint64_t index = 0;     // 0 for the first frame of the loop
  std::uint64_t wall_ns = 0;   // CLOCK_MONOTONIC duration
  // Per event, in group order: the delta scaled for multiplexing (Δcount × Δenabled / Δrunning, rounded);
  // 0 where the event was not counted during the frame (see counted).
  std::array<std::uint64_t, kMaxGroupMembers> deltas{};
  std::array<bool, kMaxGroupMembers> counted{};
  // Which budgets the frame exceeded: bit 0 wall time, bit 1 + i event i. 0 when within every budget.
  std::uint32_t over_budget_mask = 0;
  bool over_budget() const noexcept { return over_budget_mask != 0; }
  bool over_wall_budget() const noexcept { return (over_budget_mask & 1u) != 0; }
  bool over_event_budget(std::size_t event) const noexcept { return (over_budget_mask >> (event + 1)) & 1u; }
};

class FrameLoop {
 public:
  // Reads `group` (which must outlive the loop and be enabled by the caller) at every frame boundary.
  explicit FrameLoop(CounterGroup& group, FrameLoopOptions options = {});
  // Wall time only.
  explicit FrameLoop(FrameLoopOptions options = {});
  // The caller reads a group with these events itself and passes each reading to begin/end/mark.
  explicit FrameLoop(std::vector<std::string> event_names, FrameLoopOptions options = {});

  // A frame whose delta of `event` (a member name as the group reports it, e.g. "page-faults:u", or an index)
  // exceeds `limit` is over budget. 0 removes the budget. Throws selfperf::Error for an unknown event.
  void set_budget(std::string_view event, std::uint64_t limit);
  void set_budget(std::size_t event, std::uint64_t limit);
  void set_wall_budget(std::chrono::nanoseconds budget) noexcept;

  // Frame boundaries. begin() starts a frame, end() finishes and records it; mark() does both with a single
  // reading: it finishes the open frame (if any) and starts the next one.
  void begin();
  const FrameRecord& end();
  void mark();
  // The same with a reading and a CLOCK_MONOTONIC time the caller took (its size must equal events()).
  void begin(const GroupReading& reading, std::uint64_t now_ns);
  const FrameRecord& end(const GroupReading& reading, std::uint64_t now_ns);
  void mark(const GroupReading& reading, std::uint64_t now_ns);
  bool in_frame() const noexcept { return open_; }

  std::uint64_t frames() const noexcept { return frames_; }
  std::size_t events() const noexcept { return names_.size(); }
  const std::string& event_name(std::size_t event) const { return names_.at(event); }
  // "ns" for task-clock and cpu-clock, "" for counts.
  const std::string& event_unit(std::size_t event) const { return units_.at(event); }
  std::uint64_t budget(std::size_t event) const { return budgets_.at(event); }
  std::chrono::nanoseconds wall_budget() const noexcept { return std::chrono::nanoseconds(wall_budget_ns_); }

  const Histogram& wall_histogram() const noexcept { return histograms_[0]; }
  const Histogram& histogram(std::size_t event) const { return histograms_.at(event + 1); }
  // Frames in which `event` was not counted at all (group disabled, or multiplexed out for the whole frame):
  // they are left out of its histogram.
  std::uint64_t not_counted(std::size_t event) const { return not_counted_.at(event); }
  const FrameRecord& last_frame() const noexcept { return last_; }

  // Over-budget frames: how many there were, how many of them the ring no longer holds, and the held ones,
  // oldest first.
  std::uint64_t over_budget_count() const noexcept { return over_budget_total_; }
  std::uint64_t over_budget_dropped() const noexcept;
  std::vector<FrameRecord> over_budget_frames() const;

  // Per-event p50/p90/p99/p99.9/max/mean table and the over-budget frames with their deltas.
  std::string report() const;
  // The same as JSON: {"frames","wall_budget_ns","wall":<histogram>,"events":[{"name","unit","budget","not_counted",
  // "histogram"}],"over_budget_count","over_budget_dropped","over_budget_frames":[{"index","wall_ns","deltas":
  // {<event>: n or null when not counted},"exceeded":["wall"|<event>…]}]}, histograms as Histogram::to_json writes
  // them; "unit" is "ns" or "count".
  std::string to_json() const;
  // RFC 4180 CSV, one row for wall time and one per event: event,unit,budget,not_counted,count,min,max,sum,mean,
  // stddev,p50,p90,p99,p99.9,p99.99. unit (ns or count) is that of budget, min … p99.99; not_counted and count
  // are frame counts; budget 0 is none; min … p99.99 empty when no frame was measured. Integers exact, mean and
  // stddev the shortest decimal that reads back as the double. docs/formats.md.
  std::string to_csv() const;
  // The over-budget frames kept (over_budget_frames()) as RFC 4180 CSV, one row per frame and member (wall time
  // first): frame,event,unit,value,budget,over_budget. value is the frame's wall time or delta (empty where the
  // event was not counted in the frame), over_budget 1 when that member exceeded its budget, else 0.
  std::string over_budget_csv() const;
  // Forgets every frame (histograms, ring, counts) but keeps the events and budgets.
  void reset() noexcept;

  static std::uint64_t now_ns() noexcept;

 private:
  void check(const GroupReading& reading) const;

  CounterGroup* group_ = nullptr;
  std::vector<std::string> names_;
  std::vector<std::string> units_;
  std::vector<std::uint64_t> budgets_;
  std::vector<std::uint64_t> not_counted_;
  std::uint64_t wall_budget_ns_ = 0;
  std::vector<Histogram> histograms_;  // [0] wall time, [1 + i] event i
  std::vector<FrameRecord> ring_;
  std::size_t ring_next_ = 0;
  std::uint64_t over_budget_total_ = 0;
  std::uint64_t frames_ = 0;
  bool open_ = false;
  GroupReading start_;
  GroupReading scratch_;
  std::uint64_t start_ns_ = 0;
  FrameRecord last_;
};

}  // namespace selfperf
