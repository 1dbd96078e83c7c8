// FrameLoop: frame boundaries → per-event deltas → histograms and the over-budget ring.
#include "selfperf/frame_loop.hpp"

#include <time.h>

#include <algorithm>
#include <cstdio>

#include "selfperf/error.hpp"
#include "counting/timeline_state.hpp"

namespace selfperf {

namespace {

std::string unit_of(const std::string& event) {
  // The software clocks count nanoseconds; everything else is a plain count.
  for (std::string_view clock : {"task-clock", "cpu-clock"})
    if (event.compare(0, clock.size(), clock) == 0) return "ns";
  return "";
}

std::vector<std::string> names_of(const CounterGroup& group) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < group.size(); ++i) names.push_back(group.event(i).name);
  return names;
}

void append(std::string& out, const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  out += buf;
}

}  // namespace

FrameLoop::FrameLoop(CounterGroup& group, FrameLoopOptions options) : FrameLoop(names_of(group), options) {
  group_ = &group;
}

FrameLoop::FrameLoop(FrameLoopOptions options) : FrameLoop(std::vector<std::string>{}, options) {}

FrameLoop::FrameLoop(std::vector<std::string> event_names, FrameLoopOptions options)
    : names_(std::move(event_names)),
      budgets_(names_.size(), 0),
      not_counted_(names_.size(), 0),
      histograms_(names_.size() + 1),
      ring_(options.over_budget_capacity) {
  if (names_.size() > kMaxGroupMembers)
    throw Error("FrameLoop: " + std::to_string(names_.size()) + " events given, at most " +
                std::to_string(kMaxGroupMembers) + " fit a group; split them over several loops");
  for (const auto& name : names_) units_.push_back(unit_of(name));
  set_wall_budget(options.wall_budget);
}

void FrameLoop::set_budget(std::string_view event, std::uint64_t limit) {
  const auto it = std::find(names_.begin(), names_.end(), event);
  if (it == names_.end()) {
    std::string known;
    for (const auto& name : names_) known += (known.empty() ? "" : ", ") + name;
    throw Error("FrameLoop::set_budget: '" + std::string(event) + "' is not an event of this loop (events: " +
                (known.empty() ? std::string("none, wall time only; use set_wall_budget") : known) + ")");
  }
  budgets_[static_cast<std::size_t>(it - names_.begin())] = limit;
}

void FrameLoop::set_budget(std::size_t event, std::uint64_t limit) {
  if (event >= names_.size())
    throw Error("FrameLoop::set_budget: event index " + std::to_string(event) + " is out of range (the loop has " +
                std::to_string(names_.size()) + " events)");
  budgets_[event] = limit;
}

void FrameLoop::set_wall_budget(std::chrono::nanoseconds budget) noexcept {
  wall_budget_ns_ = budget.count() > 0 ? static_cast<std::uint64_t>(budget.count()) : 0;
}

std::uint64_t FrameLoop::now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

void FrameLoop::check(const GroupReading& reading) const {
  if (reading.size() != names_.size())
    throw Error("FrameLoop: a reading of " + std::to_string(reading.size()) + " members was passed to a loop over " +
                std::to_string(names_.size()) + " events; pass readings of the group the loop was made for");
}

void FrameLoop::begin(const GroupReading& reading, std::uint64_t now_ns) {
  check(reading);
  start_ = reading;
  start_ns_ = now_ns;
  open_ = true;
}

const FrameRecord& FrameLoop::end(const GroupReading& reading, std::uint64_t now_ns) {
  if (!open_) throw Error("FrameLoop::end: no frame is open; call begin() or mark() before end()");
  check(reading);
  FrameRecord& frame = last_;
  frame = FrameRecord{};
  frame.index = frames_;
  frame.wall_ns = now_ns >= start_ns_ ? now_ns - start_ns_ : 0;
  histograms_[0].record(frame.wall_ns);
  std::uint32_t over = (wall_budget_ns_ != 0 && frame.wall_ns > wall_budget_ns_) ? 1u : 0u;
  for (std::size_t i = 0; i < names_.size(); ++i) {
    const CounterDelta d = delta(start_[i], reading[i]);
    if (!d.counted()) {
      ++not_counted_[i];
      continue;
    }
    const std::uint64_t value = d.time_running >= d.time_enabled ? d.count : saturating_round(d.scaled());
    frame.deltas[i] = value;
    frame.counted[i] = true;
    histograms_[i + 1].record(value);
    if (budgets_[i] != 0 && value > budgets_[i]) over |= 2u << i;
  }
  frame.over_budget_mask = over;
  if (over != 0) {
    ++over_budget_total_;
    if (!ring_.empty()) {
      ring_[ring_next_] = frame;
      ring_next_ = ring_next_ + 1 == ring_.size() ? 0 : ring_next_ + 1;
    }
  }
  ++frames_;
  open_ = false;
  detail::timeline_record_frame(frame, names_.size(), start_ns_, now_ns);
  return frame;
}

void FrameLoop::mark(const GroupReading& reading, std::uint64_t now_ns) {
  if (open_) end(reading, now_ns);
  begin(reading, now_ns);
}

void FrameLoop::begin() {
  if (group_) group_->read(scratch_);
  begin(scratch_, now_ns());
}

const FrameRecord& FrameLoop::end() {
  const std::uint64_t now = now_ns();  // the clock first, so the group read's cost lands in the next frame
  if (group_) group_->read(scratch_);
  return end(scratch_, now);
}

void FrameLoop::mark() {
  const std::uint64_t now = now_ns();
  if (group_) group_->read(scratch_);
  mark(scratch_, now);
}

std::uint64_t FrameLoop::over_budget_dropped() const noexcept {
  return over_budget_total_ > ring_.size() ? over_budget_total_ - ring_.size() : 0;
}

std::vector<FrameRecord> FrameLoop::over_budget_frames() const {
  std::vector<FrameRecord> out;
  if (over_budget_total_ <= ring_.size()) {
    out.assign(ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(over_budget_total_));
  } else {
    out.assign(ring_.begin() + static_cast<std::ptrdiff_t>(ring_next_), ring_.end());
    out.insert(out.end(), ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(ring_next_));
  }
  return out;
}

void FrameLoop::reset() noexcept {
  for (auto& h : histograms_) h.reset();
  std::fill(not_counted_.begin(), not_counted_.end(), 0);
  std::fill(ring_.begin(), ring_.end(), FrameRecord{});
  ring_next_ = 0;
  over_budget_total_ = 0;
  frames_ = 0;
  open_ = false;
  last_ = FrameRecord{};
}

std::string FrameLoop::report() const {
  std::string out;
  std::string budgets;
  if (wall_budget_ns_ != 0) budgets += "wall > " + format_value(wall_budget_ns_, "ns");
  for (std::size_t i = 0; i < names_.size(); ++i)
    if (budgets_[i] != 0) budgets += (budgets.empty() ? "" : ", ") + names_[i] + " > " + format_value(budgets_[i], units_[i]);
  append(out, "%llu frames; over budget (%s): %llu\n", static_cast<unsigned long long>(frames_),
         budgets.empty() ? "no budget set" : budgets.c_str(), static_cast<unsigned long long>(over_budget_total_));
  append(out, "  %-20s %12s %12s %12s %12s %12s %12s\n", "per frame", "p50", "p90", "p99", "p99.9", "max", "mean");
  const auto row = [&](const std::string& name, const Histogram& h, const std::string& unit) {
    const auto f = [&](std::uint64_t v) { return format_value(v, unit); };
    append(out, "  %-20s %12s %12s %12s %12s %12s %12s\n", name.c_str(), f(h.p50()).c_str(), f(h.p90()).c_str(),
           f(h.p99()).c_str(), f(h.p999()).c_str(), f(h.max()).c_str(), f(saturating_round(h.mean())).c_str());
  };
  row("wall", histograms_[0], "ns");
  for (std::size_t i = 0; i < names_.size(); ++i) {
    // ns values print with their unit (format_value); counts say so in the label.
    row(names_[i] + (units_[i].empty() ? " [count]" : ""), histograms_[i + 1], units_[i]);
    if (not_counted_[i] != 0)
      append(out, "  (%s was not counted in %llu frames: group disabled or multiplexed out; left out above)\n",
             names_[i].c_str(), static_cast<unsigned long long>(not_counted_[i]));
  }
  if (over_budget_total_ == 0) return out;
  const auto kept = over_budget_frames();
  append(out, "over-budget frames (%zu most recent of %llu%s):\n", kept.size(),
         static_cast<unsigned long long>(over_budget_total_), over_budget_dropped() ? "; older ones dropped" : "");
  append(out, "  %10s %12s", "frame", "wall");
  for (std::size_t i = 0; i < names_.size(); ++i)
    append(out, " %16s", (names_[i] + (units_[i].empty() ? " [count]" : "")).c_str());
  out += "  exceeded\n";
  for (const auto& frame : kept) {
    append(out, "  %10llu %12s", static_cast<unsigned long long>(frame.index), format_value(frame.wall_ns, "ns").c_str());
    std::string exceeded = frame.over_wall_budget() ? "wall" : "";
    for (std::size_t i = 0; i < names_.size(); ++i) {
      append(out, " %16s", frame.counted[i] ? format_value(frame.deltas[i], units_[i]).c_str() : "not counted");
      if (frame.over_event_budget(i)) exceeded += (exceeded.empty() ? "" : ",") + names_[i];
    }
    out += "  " + exceeded + "\n";
  }
  return out;
}

}  // namespace selfperf
