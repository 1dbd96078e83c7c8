#pragma once
// Timeline: each Scope (Region, SELFPERF_SCOPE) and each FrameLoop frame, on every thread, with its start,
// duration and counter deltas, as Chrome Trace Event JSON for Perfetto UI (ui.perfetto.dev), chrome://tracing
// and speedscope. Where Region and FrameLoop keep totals and histograms, the timeline keeps every call.
//
//   selfperf::Timeline timeline(group);      // names the deltas after the group's events; preallocates
//   timeline.attach();                       // from now on every Scope and frame, on any thread, records here
//   run();
//   timeline.detach();
//   timeline.write_chrome_trace("trace.json");
//
// Recording: while a timeline is attached, a Scope reads CLOCK_MONOTONIC (vDSO) next to its two group reads and
// its end claims a preallocated record with one atomic increment: no allocation, no lock, no system call (a
// thread's first record asks the kernel once for its id and name). When the records are used up, further ones
// are counted in dropped(), never allocated. With no timeline attached a Scope pays one relaxed atomic load.
// Records hold copies of the names, so regions and threads may be gone by the time the trace is written.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace selfperf {

class CounterGroup;

struct TimelineOptions {
  std::size_t capacity = 32768;          // records (scopes + frames) kept; later ones are counted as dropped
  // The names of the counter deltas, in group order. Empty: selfperf::default_events() (what SELFPERF_SCOPE
  // counts), looked up when the trace is written. Deltas beyond the names are labelled "event <i>".
  std::vector<std::string> event_names{};
};

class Timeline {
 public:
  explicit Timeline(TimelineOptions options = {});
  // Deltas named after `group`'s events (as the group reports them, e.g. "page-faults:u").
  explicit Timeline(const CounterGroup& group, std::size_t capacity = TimelineOptions{}.capacity);
  ~Timeline();  // detaches
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Scopes and frames of every thread record into this timeline until detach(). One timeline is attached at a
  // time: throws selfperf::Error if another one is. A Scope that began before attach() is not recorded.
  void attach();
  // Stops recording; returns once no thread is still writing a record. Idempotent.
  void detach() noexcept;
  bool attached() const noexcept;

  std::size_t capacity() const noexcept;
  std::size_t size() const noexcept;        // records held
  std::uint64_t dropped() const noexcept;   // records that found the timeline full
  // Forgets every record. Throws selfperf::Error while attached (threads may be writing).
  void clear();

  // {"traceEvents":[…],"displayTimeUnit":"ns","otherData":{…}}: an "X" (complete) event per scope (cat "scope",
  // name = region name) and per frame (cat "frame", name "frame"), ts and dur in µs of CLOCK_MONOTONIC with ns
  // precision, pid and tid of the recording thread, args = the counter deltas keyed "<event> (<unit>)" (unit
  // "ns" or "count"; scopes: the scaled delta minus the calibrated overhead, as Region totals it; frames: as
  // FrameLoop records it, plus "index" and "over_budget"); a scope or frame in which an event was not counted
  // has "not_counted": true instead of deltas. "M" events name the process and each thread. otherData holds
  // "clock", "events", "dropped" and "capacity".
  std::string to_chrome_trace_json() const;
  // Writes to_chrome_trace_json() to `path`; throws selfperf::Error naming the path and the reason.
  void write_chrome_trace(const std::string& path) const;

  struct State;  // the preallocated records (timeline.cpp)

 private:
  std::unique_ptr<State> state_;
};

}  // namespace selfperf
