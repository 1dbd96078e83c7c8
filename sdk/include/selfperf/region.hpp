#pragma once
// Region: what a named piece of code cost, accumulated over every Scope that measured it.
#include <array>
#include <cstdint>
#include <iosfwd>
#include <limits>
#include <span>
#include <string>

#include "selfperf/counter_group.hpp"

namespace selfperf {

// Per event, over the calls of one region: scaled deltas.
struct EventTotals {
  double sum = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = 0;
};

class Region {
 public:
  explicit Region(std::string name) : name_(std::move(name)) {}
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  const std::string& name() const noexcept { return name_; }
  std::uint64_t calls() const noexcept { return calls_; }
  // Calls in which some member was never scheduled (Δrunning = 0): their deltas are not in the totals.
  std::uint64_t not_counted() const noexcept { return not_counted_; }
  std::size_t events() const noexcept { return events_; }
  const EventTotals& totals(std::size_t event) const noexcept { return totals_[event]; }
  double mean(std::size_t event) const noexcept;
  // The enclosing region the first time this one was entered inside another; nullptr at top level.
  const Region* parent() const noexcept { return parent_; }
  int depth() const noexcept;
  void set_parent(const Region* parent) noexcept { parent_ = parent; }

  // Adds one call: the scaled delta of every member, minus the calibrated empty-region cost `overhead`
  // (one entry per member, or empty for none), clamped at zero. Allocates nothing.
  void record(const GroupReading& before, const GroupReading& after,
              std::span<const double> overhead = {}) noexcept;
  void reset() noexcept;
  // Adds another region's calls (the same code measured on another thread, with the same events).
  void merge(const Region& other) noexcept;

 private:
  friend class Scope;
  std::string name_;
  std::uint64_t calls_ = 0;
  std::uint64_t not_counted_ = 0;
  std::size_t events_ = 0;
  std::array<EventTotals, kMaxGroupMembers> totals_{};
  const Region* parent_ = nullptr;
};

// RAII: reads the group on construction and destruction and adds the delta to the region. Scopes nest per
// thread; the start/stop pair allocates nothing and, on the rdpmc path, makes no system call.
class Scope {
 public:
  Scope(CounterGroup& group, Region& region);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  CounterGroup& group_;
  Region& region_;
  Scope* outer_;
  std::uint64_t begin_ns_;  // CLOCK_MONOTONIC at the start while a Timeline is attached, else 0
  GroupReading before_;
};

// A table of regions (name indented by nesting, calls, per-event totals and means, and the derived ratios
// that the group's events allow: IPC, branch/cache/TLB miss rates).
void print_regions(std::ostream& out, std::span<const std::string> event_names,
                   std::span<const Region* const> regions);
void print_regions(std::ostream& out, const CounterGroup& group, std::span<const Region* const> regions);

// The same as JSON: {"events":[…],"regions":[{"name","depth","parent","calls","not_counted","events":{<event>:
// {"unit","total","mean","min","max"}}}]}. Counts are exact, doubles read back as written; "unit" is "ns" for
// task-clock/cpu-clock and "count" otherwise; mean and min are null for a region with no counted call.
std::string regions_json(std::span<const std::string> event_names, std::span<const Region* const> regions);
std::string regions_json(const CounterGroup& group, std::span<const Region* const> regions);
// RFC 4180 CSV (CRLF line ends, fields quoted where needed), one row per region and event:
// region,depth,parent,calls,not_counted,event,unit,total,mean,min,max (mean and min empty without a counted call).
std::string regions_csv(std::span<const std::string> event_names, std::span<const Region* const> regions);
std::string regions_csv(const CounterGroup& group, std::span<const Region* const> regions);

}  // namespace selfperf
